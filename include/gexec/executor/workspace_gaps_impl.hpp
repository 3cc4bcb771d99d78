#pragma once
// The definition of executor/workspace_gaps.hpp's make_workspace_gaps. Included by
// workspace_gaps.hpp in header-only mode and by src/gexec.cpp in compiled mode.

#include "workspace_gaps.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

GEXEC_NAMESPACE_BEGIN
namespace detail {

GEXEC_DECL std::vector<workspace_gap> make_workspace_gaps(const compact_graph& g, const plan& p) {
  const std::size_t n_calls = p.calls.size();
  std::vector<workspace_gap> gaps(n_calls);
  const auto n_entries = static_cast<std::uint32_t>(g.num_entries());
  const auto n_nodes = static_cast<std::uint32_t>(g.num_nodes());
  auto host = [&](std::uint32_t e) {
    const storage_slot& s = p.storage[p.entry_slot[e]];
    return p.alias_root[e] == e && s.kind == storage_kind::activation && s.device.device_type == kDLCPU;
  };
  // Each value's (alias group's, by its root entry) last reader; outputs to the end. It
  // begins at the node writing it (entries are numbered in node order), or, for an input
  // (donated: in the activations), at the run's start.
  std::vector<std::uint32_t> last(n_entries, 0);
  for (std::uint32_t nid = 0; nid < n_nodes; ++nid)
    for (const node_entry& in : g.node_inputs(nid)) {
      std::uint32_t& l = last[p.alias_root[g.entry_id(in)]];
      l = std::max(l, nid);
    }
  for (const node_entry& h : g.heads) last[p.alias_root[g.entry_id(h)]] = UINT32_MAX;

  // A sweep over the calls in node order, keeping the values alive in order of slot and
  // offset; at each, the bytes between them. Where more values than this are alive at
  // once, calls are out of node order or alive values overlap, nothing is lent.
  constexpr std::size_t most_alive = 1024;
  struct alive {
    std::uint32_t slot;
    std::uint64_t begin, end;
    std::uint32_t last;
  };
  std::vector<alive> now;
  auto take = [&](std::uint32_t e, std::uint32_t t) {
    if (!host(e) || last[e] < t) return true;
    if (now.size() == most_alive) return false;
    const alive a{p.entry_slot[e], p.entry_offset[e], p.entry_offset[e] + std::max<std::uint64_t>(p.alias_group_bytes(g, e), 1), last[e]};
    now.push_back(a);
    std::size_t j = now.size() - 1;  // insertion: few are alive at once
    for (; j > 0 && (now[j - 1].slot > a.slot || (now[j - 1].slot == a.slot && now[j - 1].begin > a.begin)); --j) now[j] = now[j - 1];
    now[j] = a;
    return true;
  };
  std::vector<bool> is_input(n_nodes, false), holds(p.storage.size(), false);
  bool sound = true;
  for (std::uint32_t nid : g.arg_nodes) {
    is_input[nid] = true;
    sound = sound && take(g.entry_id(nid, 0), 0);
  }
  std::uint32_t next_node = 0;  // the outputs of nodes before it are taken
  for (std::size_t k = 0; k < n_calls && sound; ++k) {
    const std::uint32_t t = p.calls[k].node_id;
    sound = t + 1 >= next_node;
    std::erase_if(now, [t](const alive& a) { return a.last < t; });  // keeps the order
    for (; next_node <= t && sound; ++next_node)
      for (std::uint32_t o = 0; o < g.num_outputs(next_node) && !is_input[next_node] && sound; ++o) sound = take(g.entry_id(next_node, o), t);
    workspace_gap& best = gaps[k];
    auto consider = [&](std::uint32_t slot, std::uint64_t from, std::uint64_t to) {
      const std::uint64_t at = align_up(from, 64);
      if (to > at && to - at > best.bytes) best = {slot, at, to - at};
    };
    std::fill(holds.begin(), holds.end(), false);
    for (std::size_t i = 0; i < now.size() && sound; ++i) {
      const std::uint32_t slot = now[i].slot;
      const std::uint64_t from = holds[slot] ? now[i - 1].end : 0;
      holds[slot] = true;
      sound = now[i].begin >= from && now[i].end <= p.storage[slot].bytes;
      consider(slot, from, now[i].begin);
      if (i + 1 == now.size() || now[i + 1].slot != slot) consider(slot, now[i].end, p.storage[slot].bytes);
    }
    for (std::uint32_t slot = 0; slot < p.storage.size(); ++slot)  // slots no value holds now
      if (!holds[slot] && p.storage[slot].kind == storage_kind::activation && p.storage[slot].device.device_type == kDLCPU)
        consider(slot, 0, p.storage[slot].bytes);
  }
  if (!sound) return std::vector<workspace_gap>(n_calls);
  return gaps;
}

}  // namespace detail
GEXEC_NAMESPACE_END
