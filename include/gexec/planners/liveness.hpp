#pragma once
// liveness: one arena per device for everything computed, each value at an offset
// chosen by its lifetime over the execution order, so that values that are never live
// at one step share bytes. Graph inputs and parameters keep a buffer each (taken on
// first use, so shared parameters and inputs bound zero-copy cost nothing), and graph
// outputs live to the end of the run, so that they can be read or bound zero-copy.
//
// Offsets are chosen greedily: values in some order, each into the tightest gap left
// by the values already placed that are live at the same time ("greedy by size",
// Pisarchyk and Lee, 2020, takes the largest first). No one order is best on every
// graph, so a few are tried and the smallest arena kept: largest first, largest
// size x lifetime first, longest lifetime first, and in order of first use. In order of
// first use the greedy is a best-fit allocator replayed over the run (a sweep over
// time with the free gaps in ordered sets), O(n log n) on any graph. The other orders
// look at every placed value that overlaps the one being placed, which costs the number
// of pairs of values live at one time: they run only where that number is at most a
// constant times the number of values (graphs where few values are live at once, that
// is nearly all of them), so that planning stays O(n log n) where many values are live
// at once (a wide fan-out, a wide concatenation), where the sweep is all there is.
// Where the result would take more bytes on a device than the compiled plan, the
// compiled plan is kept: never more than as_compiled.
//
// This header declares; liveness_impl.hpp defines (compiled once in compiled mode).

#include "../config.hpp"

#include <cstdint>
#include <vector>

#include "as_compiled.hpp"
#include "planner.hpp"

GEXEC_NAMESPACE_BEGIN

struct liveness {
  [[nodiscard]] GEXEC_DECL storage_assignment plan(const storage_problem& p) const;

 private:
  /// The values of one arena: sizes in 64-byte units' bytes, lifetimes clamped to the run.
  struct arena_values {
    std::vector<std::uint32_t> id;  ///< index into the problem's values
    std::vector<std::uint64_t> size;
    std::vector<std::uint32_t> first, last;
  };
  struct layout {
    std::vector<std::uint64_t> offset;
    std::uint64_t top = 0;
  };

  /// Pairs of values live at one time that the greedy orders may look at, per value, on
  /// top of a fixed allowance that lets small graphs try every order whatever their shape.
  static constexpr std::uint64_t pairs_per_value = 64;
  static constexpr std::uint64_t pairs_allowance = std::uint64_t{1} << 18;

  static GEXEC_DECL void place(const storage_problem& p, storage_assignment& a, std::uint32_t arena);

  /// Per value, the others live at some step it is live (CSR).
  struct neighbours {
    std::vector<std::uint64_t> begin;
    std::vector<std::uint32_t> list;
  };
  static GEXEC_DECL neighbours overlapping(const arena_values& v, const std::vector<std::uint32_t>& by_first, const std::vector<std::uint32_t>& firsts);

  /// Each value in `order` at the lowest offset of the smallest gap that holds it among
  /// the values already placed that overlap it in time (above them all if none does).
  static GEXEC_DECL layout greedy(const arena_values& v, const neighbours& nb, const std::vector<std::uint32_t>& order);

  /// The greedy in order of first use (`by_first`), as an allocator replayed over the run:
  /// at each value's first step, the values dead by then give their bytes back, and it
  /// takes the smallest free gap that holds it (the lowest of equal ones), else the bytes
  /// above every live value. O(log n) a value.
  static GEXEC_DECL layout sweep(const arena_values& v, const std::vector<std::uint32_t>& by_first);
};
static_assert(storage_planner<liveness>);

GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "liveness_impl.hpp"
#endif
