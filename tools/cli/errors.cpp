#include "errors.h"

#include <fmt/format.h>

namespace facli {

ArgLabels option_labels() {
  return {
      {"softmax_scale", "--scale"},  {"softcap", "--softcap"},
      {"window", "--window"},        {"dropout_p", "--dropout"},
      {"num_threads", "--threads"},  {"backend", "--backend"},
      {"max_seqlen_q", "--max-seqlen-q"}, {"max_seqlen_k", "--max-seqlen-k"},
      {"alibi_slopes", "--alibi"},   {"cu_seqlens_q", "--cu-seqlens-q"},
      {"cu_seqlens_k", "--cu-seqlens-k"},
  };
}

std::string file_label(const std::string& option, const std::string& path) {
  return fmt::format("{} '{}'", option, path);
}

void rethrow_library_error(const flashattn::Error& e, const ArgLabels& labels) {
  // The library formats "flashattn: argument 'x': message"; keep only the message.
  std::string msg = e.what();
  const std::string prefix = e.argument().empty()
                                 ? std::string("flashattn: ")
                                 : "flashattn: argument '" + e.argument() + "': ";
  if (msg.rfind(prefix, 0) == 0) msg.erase(0, prefix.size());
  std::string where;
  if (!e.argument().empty()) {
    auto it = labels.find(e.argument());
    where = it != labels.end() ? it->second : "argument '" + e.argument() + "'";
  }
  if (e.kind() == flashattn::ErrorKind::runtime)
    throw RunFailure(where.empty() ? msg : where + ": " + msg);
  throw CliError(where, msg);
}

}  // namespace facli
