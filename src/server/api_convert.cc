#include "server/api_convert.h"

#include "rpc/convert.h"

namespace gpusched::server {

v1::Task TaskToProto(const TaskView& v, bool with_history) {
  v1::Task p;
  rpc::TaskToProto(v.task, v.last_placement ? &*v.last_placement : nullptr, with_history, &p);
  if (v.stored_state) {
    p.set_unstored_state(p.state());  // issue 40: a restart now would find the stored one
    p.set_state(core::TaskStateName(*v.stored_state));
  }
  if (p.gang_nodes_size() == 0) {  // a gang that no longer holds its nodes: the last ones
    for (const std::string& n : v.last_gang) p.add_gang_nodes(n);
  }
  return p;
}

v1::Node NodeToProto(const NodeView& v) {
  v1::Node p;
  rpc::NodeToProto(v.node, v.gpu_models, v.connected, &p);
  return p;
}

}  // namespace gpusched::server
