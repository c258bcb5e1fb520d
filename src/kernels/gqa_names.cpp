// gqa_names.cpp -- the names of the GQA phases and of the data roles an op
// of a GQA Program plays (gqa.hpp), as the bindings and the numeric check
// (kernbench.gqa_reference) spell them.
#include <string>

#include "kernels/gqa.hpp"
#include "sim/errors.hpp"

namespace kernbench::kernels {

const char* to_string(GqaPhase phase) { return phase == GqaPhase::Prefill ? "prefill" : "decode"; }

const char* to_string(GqaRole role) {
  switch (role) {
    case GqaRole::None: return "none";
    case GqaRole::LoadQ: return "load_q";
    case GqaRole::LoadK: return "load_k";
    case GqaRole::LoadV: return "load_v";
    case GqaRole::RecvK: return "recv_k";
    case GqaRole::RecvV: return "recv_v";
    case GqaRole::SendK: return "send_k";
    case GqaRole::SendV: return "send_v";
    case GqaRole::Qk: return "qk";
    case GqaRole::Softmax: return "softmax";
    case GqaRole::Pv: return "pv";
    case GqaRole::SendO: return "send_o";
    case GqaRole::SendM: return "send_m";
    case GqaRole::SendL: return "send_l";
    case GqaRole::RecvO: return "recv_o";
    case GqaRole::RecvM: return "recv_m";
    case GqaRole::RecvL: return "recv_l";
    case GqaRole::Merge: return "merge";
    case GqaRole::Finalize: return "finalize";
    case GqaRole::StoreO: return "store_o";
  }
  return "?";
}

GqaPhase gqa_phase_from(const std::string& name) {
  if (name == "prefill") return GqaPhase::Prefill;
  if (name == "decode") return GqaPhase::Decode;
  throw ConfigError("GQA phase '" + name + "': expected 'prefill' or 'decode'");
}

}  // namespace kernbench::kernels
