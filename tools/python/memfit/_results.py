"""What memfit's commands return, as plain Python objects."""
import html
import json


class Record:
    """A JSON object with its fields as attributes (`plan.summary.feasible`)
    and as items (`plan["summary"]`). Nested objects are Records; lists stay
    lists (of Records where they held objects)."""

    def __init__(self, data):
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name):
        try:
            return _wrap(self._data[name])
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no field {name!r}; fields: "
                + ", ".join(self._data)) from None

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key):
        return _wrap(self._data[key])

    def __contains__(self, key):
        return key in self._data

    def __iter__(self):
        return iter(self._data)

    def __dir__(self):
        return list(self._data) + [k for k in type(self).__dict__ if not k.startswith("_")]

    def keys(self):
        return self._data.keys()

    def to_dict(self):
        """The JSON object, as read."""
        return self._data

    def __eq__(self, other):
        return isinstance(other, Record) and self._data == other._data

    def __repr__(self):
        return f"{type(self).__name__}({json.dumps(self._data)[:200]})"


def _wrap(value):
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _iframe(page, height=640):
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" '
            f'style="width:100%;height:{height}px;border:0"></iframe>')


class Plan(Record):
    """plan.json's fields (`feasible`, `summary`, `tasks`, `blocks` with
    each tensor's decision, ...), the summary memfit prints (`text`, also
    `str(plan)`) and the HTML report, which a notebook shows."""

    def __init__(self, data, text="", report_html="", trace_text=None,
                 path=None):
        super().__init__(data)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "report_html", report_html)
        object.__setattr__(self, "_trace_text", trace_text)
        object.__setattr__(self, "path", path)

    @property
    def trace(self):
        """trace.json (Chrome's trace format), read when asked for: a large
        model's is large."""
        return json.loads(self._trace_text) if self._trace_text else None

    @property
    def feasible(self):
        return bool(self._data["summary"]["feasible"])

    @property
    def planned_bytes(self):
        return self._data["summary"]["planned_bytes"]

    @property
    def planned_seconds(self):
        return self._data["summary"]["planned_seconds"]

    @property
    def bound_seconds(self):
        return self._data["summary"].get("bound_seconds")

    def decisions(self):
        """Each block's decision, by block name: 'keep', 'offload',
        'recompute', 'load' and so on (report-format.md)."""
        return {b["name"]: b["decision"] for b in self._data["blocks"]}

    def memory_timeline(self):
        """(seconds, bytes) steps of the arena's occupancy over the planned
        iteration, from the blocks' residencies, plus the resident bytes
        (weights, gradients, optimizer state) that stay the whole run."""
        resident = self._data["summary"]["resident_bytes"]
        events = {}
        for b in self._data["blocks"]:
            for r in b.get("residencies", []):
                events[r["start"]] = events.get(r["start"], 0) + r["bytes"]
                events[r["end"]] = events.get(r["end"], 0) - r["bytes"]
        times, used, live = [], [], 0
        for t in sorted(events):
            live += events[t]
            times.append(t)
            used.append(resident + live)
        return times, used

    def plot_memory(self, ax=None):
        """Plots memory_timeline() with matplotlib, the budget (less the
        libraries' reserve) as a line; returns the axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(9, 3.5))
        times, used = self.memory_timeline()
        mib = 1 << 20
        ax.step([t * 1e3 for t in times], [u / mib for u in used],
                where="post", label="resident + arena in use")
        room = self._data["budget_bytes"] - self._data["library_reserve_bytes"]
        ax.axhline(room / mib, color="tab:red", linestyle="--",
                   label="budget less the library reserve")
        ax.set_xlabel("ms into the iteration (planned)")
        ax.set_ylabel("MiB")
        ax.set_title(f"{self._data['model']}: batch {self._data['batch']}, "
                     f"{self._data['sub_batches']} x {self._data['sub_batch']}")
        ax.legend(loc="best")
        return ax

    def __str__(self):
        return self.text

    def __repr__(self):
        s = self._data["summary"]
        return (f"<memfit.Plan {self._data['model']} batch {self._data['batch']}: "
                f"{'feasible' if s['feasible'] else 'infeasible'}, "
                f"{s['planned_bytes']} bytes, {s['planned_seconds'] * 1e3:.3f} ms>")

    def _repr_html_(self):
        return _iframe(self.report_html) if self.report_html else None


class Inspection(Record):
    """`memfit inspect --json`: the model's sizes, lower bound and ops."""

    def __init__(self, data, text=""):
        super().__init__(data)
        object.__setattr__(self, "text", text)


class Comparison(Record):
    """`memfit compare --json`: every policy at every budget."""


class Compiled:
    """A trainer `memfit compile` wrote: its directory and its plan."""

    def __init__(self, out_dir, plan):
        self.out_dir = out_dir
        self.plan = plan

    def __repr__(self):
        return f"<memfit.Compiled {self.out_dir!s}: {self.plan!r}>"

    def _repr_html_(self):
        return self.plan._repr_html_()
