import re, sys
def parse(path):
    t = open(path, errors="replace").read()
    it = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^iteration (\d+)\s+loss (\S+)", t, re.M)}
    gn = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^iteration (\d+)\s.*grad norm (\S+)", t, re.M)}
    va = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^validation after step (\d+)\s+val loss (\S+)", t, re.M)}
    return it, gn, va
def rel(a, b):
    ks = sorted(set(a) & set(b))
    if not ks: return "none", 0
    return max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-12) for k in ks), len(ks)
name, cpu, gpu = sys.argv[1:4]
c, g = parse(cpu), parse(gpu)
out = [name]
for lab, i in (("loss", 0), ("grad_norm", 1), ("val_loss", 2)):
    d, n = rel(g[i], c[i])
    if n: out.append("%s maxrel %.3g over %d (cpu %d, gpu %d)" % (lab, d, n, len(c[i]), len(g[i])))
    elif c[i]: out.append("%s MISSING on gpu (cpu has %d)" % (lab, len(c[i])))
print("  ".join(out))
