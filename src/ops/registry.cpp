#include "ops/registry.h"

#include "core/error.h"

namespace k3 {
namespace {
std::vector<OpInfo>& ops() {
  static std::vector<OpInfo> v;  // filled at static-init time, read-only afterwards
  return v;
}
}  // namespace

const char* impl_name(Impl i) { return i == Impl::ref ? "ref" : i == Impl::cpu ? "cpu" : "cuda"; }

const std::vector<OpInfo>& registered_ops() { return ops(); }

const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& o : ops())
    if (o.name == name) return &o;
  return nullptr;
}

void add_op_info(OpInfo info) {
  check(find_op(info.name) == nullptr, "op registry: '", info.name, "' registered twice");
  check(info.has_ref, "op registry: '", info.name, "' has no reference implementation");
  ops().push_back(std::move(info));
}

}  // namespace k3
