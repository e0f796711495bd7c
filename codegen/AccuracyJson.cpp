//===- AccuracyJson.cpp - The summary's accuracy in JSON ------------------===//
#include "codegen/AccuracyJson.h"

namespace memfit {

nlohmann::json accuracyJson(const ReportSummary &s) {
  if (s.accuracyPrecision.empty())
    return nullptr;
  nlohmann::json j = {{"device_class", s.accuracyClass},
                      {"precision", s.accuracyPrecision},
                      {"cases", s.accuracyCases}};
  if (s.accuracyCases > 0) {
    j["low"] = s.accuracyLow;
    j["high"] = s.accuracyHigh;
    j["basis"] = s.accuracyBasis;
  }
  return j;
}

bool readAccuracyJson(const nlohmann::json &j, ReportSummary &s,
                      std::string &why) {
  if (j.is_null())
    return true;
  auto text = [&](const char *k, std::string &out) {
    if (!j.contains(k) || !j[k].is_string()) {
      why = std::string("accuracy.") + k + " must be a string";
      return false;
    }
    out = j[k].get<std::string>();
    return true;
  };
  if (!j.is_object()) {
    why = "accuracy must be an object or null";
    return false;
  }
  if (!text("device_class", s.accuracyClass) ||
      !text("precision", s.accuracyPrecision))
    return false;
  if (!j.contains("cases") || !j["cases"].is_number_integer() ||
      j["cases"].get<int64_t>() < 0 || j["cases"].get<int64_t>() > 1000000) {
    why = "accuracy.cases must be a count";
    return false;
  }
  s.accuracyCases = j["cases"].get<int32_t>();
  if (s.accuracyCases == 0)
    return true;
  for (const char *k : {"low", "high"})
    if (!j.contains(k) || !j[k].is_number() || !(j[k].get<double>() >= -1) ||
        !(j[k].get<double>() < 1e6)) {
      why = std::string("accuracy.") + k + " must be a ratio above -1";
      return false;
    }
  s.accuracyLow = j["low"].get<double>();
  s.accuracyHigh = j["high"].get<double>();
  return text("basis", s.accuracyBasis);
}

} // namespace memfit
