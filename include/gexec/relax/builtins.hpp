#pragma once
// The vm.builtin.* functions that TVM's compiler emits for CPU models, with the
// semantics of TVM's src/runtime/vm/builtin.cc: checks of what a function is given
// (tensor, shape, tuple, scalar), the shape heap (match_shape, make_shape), storage
// and tensors carved from it, reshape, tuples, If conditions. A function table entry
// whose name is none of these and no kernel of the library is refused when the
// executable is loaded (executable.hpp's loader), never at a run.
//
// Each builtin takes its arguments as the VM passes them and returns its result (None
// for those that return nothing); a bad argument is errc::invalid_argument (or
// shape_mismatch/dtype_mismatch for a check that fails) with the error context TVM's
// compiler put in the call ("ErrorContext(fn=main, loc=param[0], ...)").

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/aligned_memory.hpp"
#include "../detail/shape.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../ndarray.hpp"
#include "value.hpp"

GEXEC_NAMESPACE_BEGIN

namespace relax {

/// What a builtin sees of one call: its arguments where they lie (registers, constants,
/// the immediates of the instruction), never copied for the call.
struct builtin_call {
  std::span<const vm_value* const> args;
  /// The storage vm.builtin.alloc_storage made at this call site in an earlier run, reused
  /// when nothing else holds it any more (no tensor of it is still alive).
  std::shared_ptr<vm_storage>* storage_slot = nullptr;

  [[noreturn]] void fail(errc code, const std::string& what) const { throw error(code, what); }
  const vm_value& at(std::size_t i) const {
    if (i >= args.size()) fail(errc::invalid_argument, "takes at least " + std::to_string(i + 1) + " arguments, got " + std::to_string(args.size()));
    return *args[i];
  }
  std::int64_t int_at(std::size_t i) const {
    const vm_value& x = at(i);
    if (const auto* v = x.get_if<std::int64_t>()) return *v;
    if (const auto* b = x.get_if<bool>()) return *b ? 1 : 0;
    fail(errc::invalid_argument, "argument " + std::to_string(i) + " is a " + kind_name(x) + ", not an int");
  }
  const ndarray& tensor_at(std::size_t i) const {
    const vm_value& x = at(i);
    if (const auto* t = x.get_if<ndarray>(); t && t->defined()) return *t;
    fail(errc::invalid_argument, "argument " + std::to_string(i) + " is a " + kind_name(x) + ", not a tensor");
  }
  const vm_shape& shape_at(std::size_t i) const {
    const vm_value& x = at(i);
    if (const auto* s = x.get_if<vm_shape>()) return *s;
    fail(errc::invalid_argument, "argument " + std::to_string(i) + " is a " + kind_name(x) + ", not a shape");
  }
  DLDataType dtype_at(std::size_t i) const {
    const vm_value& x = at(i);
    if (const auto* t = x.get_if<DLDataType>()) return *t;
    fail(errc::invalid_argument, "argument " + std::to_string(i) + " is a " + kind_name(x) + ", not a dtype");
  }
  /// A string argument, or "" for None (TVM's Optional<String>).
  std::string_view string_at(std::size_t i) const {
    const vm_value& x = at(i);
    if (const auto* s = x.get_if<std::string>()) return *s;
    if (x.is_none()) return {};
    fail(errc::invalid_argument, "argument " + std::to_string(i) + " is a " + kind_name(x) + ", not a string");
  }
  /// The shape heap argument (an int64 tensor, or None), as TVM's heap_data.
  std::span<std::int64_t> heap_at(std::size_t i) const {
    const vm_value& x = at(i);
    if (x.is_none()) return {};
    const ndarray& h = tensor_at(i);
    if (!same_dtype(h.dtype(), DLDataType{kDLInt, 64, 1}) || h.ndim() != 1) fail(errc::invalid_argument, "the shape heap is not a 1-d int64 tensor");
    return {static_cast<std::int64_t*>(h.data()), static_cast<std::size_t>(h.shape()[0])};
  }
};

using builtin_fn = vm_value (*)(const builtin_call&);

namespace builtin {

namespace detail {

inline std::string with_context(std::string_view err_ctx, const std::string& what) {
  return err_ctx.empty() ? what : std::string(err_ctx) + what;
}

inline std::int64_t& heap_slot(const builtin_call& c, std::span<std::int64_t> heap, std::int64_t reg) {
  if (reg < 0 || static_cast<std::uint64_t>(reg) >= heap.size())
    c.fail(errc::invalid_argument, "shape heap slot " + std::to_string(reg) + " of " + std::to_string(heap.size()));
  return heap[static_cast<std::size_t>(reg)];
}

/// TVM's MatchShapeCode.
enum match_code : std::int64_t { assert_equal_to_imm = 0, store_to_heap = 1, no_op = 2, assert_equal_to_load = 3 };
/// TVM's MakeShapeCode.
enum make_code : std::int64_t { use_imm = 0, load_shape = 1 };

/// Matches one dimension (`dim` >= 0) or a prim value (`dim` < 0) against its code.
inline void match_one(const builtin_call& c, std::span<std::int64_t> heap, std::int64_t code, std::int64_t reg, std::int64_t value,
                      std::string_view err_ctx, std::int64_t dim) {
  auto what = [dim] { return dim < 0 ? std::string("the value") : "shape[" + std::to_string(dim) + "]"; };
  switch (code) {
    case assert_equal_to_imm:
      if (value != reg)
        c.fail(errc::shape_mismatch, with_context(err_ctx, " match_cast error: " + what() + " is " + std::to_string(value) + ", expected " + std::to_string(reg)));
      return;
    case store_to_heap: heap_slot(c, heap, reg) = value; return;
    case no_op: return;
    case assert_equal_to_load:
      if (const std::int64_t want = heap_slot(c, heap, reg); value != want)
        c.fail(errc::shape_mismatch,
               with_context(err_ctx, " match_cast error: " + what() + " is " + std::to_string(value) + ", expected " + std::to_string(want) + " (as before)"));
      return;
    default: c.fail(errc::invalid_argument, "match code " + std::to_string(code));
  }
}

inline std::int64_t make_one(const builtin_call& c, std::span<std::int64_t> heap, std::int64_t code, std::int64_t reg) {
  if (code == use_imm) return reg;
  if (code == load_shape) return heap_slot(c, heap, reg);
  c.fail(errc::invalid_argument, "shape code " + std::to_string(code));
}

/// The shape of a tensor or a shape value.
inline std::vector<std::int64_t> shape_of_value(const builtin_call& c, std::size_t i) {
  const vm_value& x = c.at(i);
  if (const auto* t = x.get_if<ndarray>(); t && t->defined()) return {t->shape().begin(), t->shape().end()};
  if (const auto* s = x.get_if<vm_shape>()) return s->dims;
  c.fail(errc::invalid_argument, "argument " + std::to_string(i) + " is a " + kind_name(x) + ", not a tensor or shape");
}

/// A tensor of `shape` and `dtype` over `base + offset`, owned by `owner`.
inline ndarray view_over(const builtin_call& c, void* base, std::uint64_t capacity, std::int64_t offset, const std::vector<std::int64_t>& shape,
                         DLDataType dtype, std::shared_ptr<const void> owner) {
  const auto bytes = gexec::detail::checked_byte_size(shape, dtype);
  if (!bytes) c.fail(errc::invalid_argument, "shape " + gexec::detail::shape_to_string(shape) + " is negative or overflows");
  if (offset < 0 || static_cast<std::uint64_t>(offset) > capacity || *bytes > capacity - static_cast<std::uint64_t>(offset))
    c.fail(errc::out_of_memory, "a " + vm_dtype_name(dtype) + gexec::detail::shape_to_string(shape) + " tensor at offset " + std::to_string(offset) +
                                    " does not fit in a storage of " + std::to_string(capacity) + " bytes");
  std::vector<std::int64_t> dims = shape;
  DLTensor t{static_cast<std::byte*>(base) + offset, cpu(), static_cast<std::int32_t>(dims.size()), dtype, dims.data(), nullptr, 0};
  return ndarray::view(t, std::move(owner));
}

}  // namespace detail

inline vm_value null_value(const builtin_call&) { return {}; }
inline vm_value copy(const builtin_call& c) { return c.at(0); }

inline vm_value check_tensor_info(const builtin_call& c) {
  const bool with_dtype = c.args.size() != 3;
  const std::string_view err_ctx = c.string_at(with_dtype ? 3 : 2);
  const vm_value& x = c.at(0);
  const auto* t = x.get_if<ndarray>();
  if (!t || !t->defined()) c.fail(errc::invalid_argument, detail::with_context(err_ctx, std::string(" expect a Tensor but get ") + kind_name(x)));
  const std::int64_t ndim = c.int_at(1);
  if (ndim != -1 && t->ndim() != ndim)
    c.fail(errc::shape_mismatch, detail::with_context(err_ctx, " expect Tensor with ndim " + std::to_string(ndim) + " but get " + std::to_string(t->ndim())));
  if (with_dtype && !c.at(2).is_none()) {
    const DLDataType want = c.dtype_at(2);
    if (!same_dtype(t->dtype(), want))
      c.fail(errc::dtype_mismatch, detail::with_context(err_ctx, " expect Tensor with dtype " + to_string(want) + " but get " + to_string(t->dtype())));
  }
  return {};
}

inline vm_value check_shape_info(const builtin_call& c) {
  const std::string_view err_ctx = c.string_at(2);
  const auto* s = c.at(0).get_if<vm_shape>();
  if (!s) c.fail(errc::invalid_argument, detail::with_context(err_ctx, std::string(" expect a Shape but get ") + kind_name(c.at(0))));
  const std::int64_t ndim = c.int_at(1);
  if (ndim != -1 && static_cast<std::int64_t>(s->dims.size()) != ndim)
    c.fail(errc::shape_mismatch, detail::with_context(err_ctx, " expect Shape with ndim " + std::to_string(ndim) + " but get " + std::to_string(s->dims.size())));
  return {};
}

inline vm_value check_prim_value_info(const builtin_call& c) {
  const std::string_view err_ctx = c.string_at(2);
  const DLDataType want = c.dtype_at(1);
  const vm_value& x = c.at(0);
  const bool ok = ((want.code == dlpack_bool_code || (want.code == kDLUInt && want.bits == 1)) && (x.get_if<bool>() || x.get_if<std::int64_t>())) ||
                  ((want.code == kDLInt || want.code == kDLUInt) && (x.get_if<std::int64_t>() || x.get_if<bool>())) ||
                  (want.code == kDLFloat && (x.get_if<double>() || x.get_if<std::int64_t>()));
  if (!ok) c.fail(errc::invalid_argument, detail::with_context(err_ctx, ", expected dtype " + vm_dtype_name(want) + ", but received a " + kind_name(x)));
  return {};
}

inline vm_value check_tuple_info(const builtin_call& c) {
  const std::string_view err_ctx = c.string_at(2);
  const auto* t = c.at(0).get_if<vm_tuple>();
  if (!t || !*t) c.fail(errc::invalid_argument, detail::with_context(err_ctx, std::string(" expect a Tuple but get ") + kind_name(c.at(0))));
  const std::int64_t size = c.int_at(1);
  if (static_cast<std::int64_t>((*t)->size()) != size)
    c.fail(errc::shape_mismatch,
           detail::with_context(err_ctx, " expect a Tuple with " + std::to_string(size) + " elements, but get a Tuple with " + std::to_string((*t)->size()) + " elements."));
  return {};
}

inline vm_value check_func_info(const builtin_call& c) {
  if (!c.at(0).get_if<function_ref>())
    c.fail(errc::invalid_argument, detail::with_context(c.string_at(1), std::string(" expect a Function but get ") + kind_name(c.at(0))));
  return {};
}

inline vm_value alloc_shape_heap(const builtin_call& c) {
  const std::int64_t size = c.int_at(1);
  if (size < 0 || size > (std::int64_t{1} << 24)) c.fail(errc::invalid_argument, "a shape heap of " + std::to_string(size) + " slots");
  ndarray heap = ndarray::empty({size}, DLDataType{kDLInt, 64, 1});
  if (size > 0) std::memset(heap.data(), 0, static_cast<std::size_t>(size) * sizeof(std::int64_t));
  return heap;
}

inline vm_value match_shape(const builtin_call& c) {
  const std::vector<std::int64_t> shape = detail::shape_of_value(c, 0);
  const std::span<std::int64_t> heap = c.heap_at(1);
  const std::int64_t size = c.int_at(2);
  if (size < 0 || static_cast<std::uint64_t>(size) > (c.args.size() - 3) / 2) c.fail(errc::invalid_argument, std::to_string(size) + " dimensions to match, " + std::to_string(c.args.size()) + " arguments");
  const std::string_view err_ctx = c.string_at(3 + 2 * static_cast<std::size_t>(size));
  if (static_cast<std::int64_t>(shape.size()) != size)
    c.fail(errc::shape_mismatch, detail::with_context(err_ctx, " match_cast shape size mismatch: " + std::to_string(shape.size()) + " dimensions, expected " + std::to_string(size)));
  for (std::size_t i = 0; i < shape.size(); ++i)
    detail::match_one(c, heap, c.int_at(3 + 2 * i), c.int_at(4 + 2 * i), shape[i], err_ctx, static_cast<std::int64_t>(i));
  return {};
}

inline vm_value match_prim_value(const builtin_call& c) {
  detail::match_one(c, c.heap_at(1), c.int_at(2), c.int_at(3), c.int_at(0), c.args.size() > 4 ? c.string_at(4) : std::string_view{}, -1);
  return {};
}

inline vm_value make_shape(const builtin_call& c) {
  const std::span<std::int64_t> heap = c.heap_at(0);
  const std::int64_t size = c.int_at(1);
  if (size < 0 || static_cast<std::uint64_t>(size) > (c.args.size() - 2) / 2) c.fail(errc::invalid_argument, std::to_string(size) + " dimensions, " + std::to_string(c.args.size()) + " arguments");
  vm_shape s;
  s.dims.reserve(static_cast<std::size_t>(size));
  for (std::size_t i = 0; i < static_cast<std::size_t>(size); ++i) s.dims.push_back(detail::make_one(c, heap, c.int_at(2 + 2 * i), c.int_at(3 + 2 * i)));
  return s;
}

inline vm_value make_prim_value(const builtin_call& c) { return detail::make_one(c, c.heap_at(0), c.int_at(1), c.int_at(2)); }

/// alloc_storage(vm, shape, device_index, dtype_hint, scope): a block of
/// prod(shape) * sizeof(dtype) bytes on the host (the loader refused other devices).
inline vm_value alloc_storage(const builtin_call& c) {
  const vm_shape& shape = c.shape_at(1);
  const std::int64_t device_index = c.int_at(2);
  if (device_index != 0 && device_index != -1)
    c.fail(errc::device_mismatch, "storage on device " + std::to_string(device_index) + " of the VM's one device (the host)");
  const DLDataType dtype = c.dtype_at(3);
  if (const std::string_view scope = c.args.size() > 4 ? c.string_at(4) : std::string_view{}; !scope.empty() && scope != "global")
    c.fail(errc::unsupported, "memory scope \"" + std::string(scope) + "\" (the host has \"global\" only)");
  const auto bytes = gexec::detail::checked_byte_size(shape.dims, dtype);
  if (!bytes) c.fail(errc::invalid_argument, "storage of shape " + gexec::detail::shape_to_string(shape.dims) + " is negative or overflows");
  if (c.storage_slot) {
    std::shared_ptr<vm_storage>& kept = *c.storage_slot;
    if (kept && kept.use_count() == 1 && kept->bytes == *bytes) return kept;
  }
  auto s = std::make_shared<vm_storage>();
  s->data = std::shared_ptr<void>(gexec::detail::allocate_aligned(*bytes), &gexec::detail::free_aligned);
  s->bytes = *bytes;
  if (c.storage_slot) *c.storage_slot = s;
  return s;
}

inline vm_value alloc_tensor(const builtin_call& c) {
  const auto* s = c.at(0).get_if<std::shared_ptr<vm_storage>>();
  if (!s || !*s) c.fail(errc::invalid_argument, std::string("argument 0 is a ") + kind_name(c.at(0)) + ", not a storage");
  if (c.args.size() > 4)
    if (const std::string_view scope = c.string_at(4); !scope.empty() && scope != "global")
      c.fail(errc::unsupported, "memory scope \"" + std::string(scope) + "\" (the host has \"global\" only)");
  const std::shared_ptr<vm_storage>& storage = *s;
  return detail::view_over(c, storage->data.get(), storage->bytes, c.int_at(1), c.shape_at(2).dims, c.dtype_at(3), storage);
}

inline vm_value reshape(const builtin_call& c) {
  const ndarray& t = c.tensor_at(0);
  const vm_shape& shape = c.shape_at(1);
  const auto n = gexec::detail::checked_numel(shape.dims);
  if (!n || *n != t.numel())
    c.fail(errc::shape_mismatch, "reshape of " + gexec::detail::shape_to_string(t.shape()) + " to " + gexec::detail::shape_to_string(shape.dims) + ": the element counts differ");
  if (!t.is_contiguous()) c.fail(errc::invalid_argument, "reshape of a strided tensor");
  return detail::view_over(c, t.data(), t.byte_size(), 0, shape.dims, t.dtype(), t.storage_owner());
}

inline vm_value shape_of(const builtin_call& c) { return vm_shape{detail::shape_of_value(c, 0)}; }

inline vm_value ensure_zero_offset(const builtin_call& c) { return c.tensor_at(0); }

inline vm_value to_device(const builtin_call& c) {
  const ndarray& t = c.tensor_at(0);
  const std::int64_t type = c.int_at(1);
  if (type != kDLCPU) c.fail(errc::device_mismatch, "a copy to device type " + std::to_string(type) + " (the VM runs on the host)");
  return t.copy();
}

inline vm_value read_if_cond(const builtin_call& c) {
  const vm_value& x = c.at(0);
  if (const auto* b = x.get_if<bool>()) return *b;
  if (const auto* i = x.get_if<std::int64_t>()) return *i != 0;
  const ndarray& t = c.tensor_at(0);
  const DLDataType d = t.dtype();
  if ((d.code != kDLInt && d.code != kDLUInt && d.code != dlpack_bool_code) || t.numel() < 1)
    c.fail(errc::dtype_mismatch, "an If condition of " + vm_dtype_name(d) + gexec::detail::shape_to_string(t.shape()) + " (an integer or bool scalar is)");
  std::int64_t v = 0;
  switch (d.bits) {
    case 1:
    case 8: v = *static_cast<const std::int8_t*>(t.data()); break;
    case 16: v = *static_cast<const std::int16_t*>(t.data()); break;
    case 32: v = *static_cast<const std::int32_t*>(t.data()); break;
    case 64: v = *static_cast<const std::int64_t*>(t.data()); break;
    default: c.fail(errc::dtype_mismatch, "an If condition of " + vm_dtype_name(d));
  }
  return v != 0;
}

inline vm_value make_tuple(const builtin_call& c) {
  auto items = std::make_shared<std::vector<vm_value>>();
  items->reserve(c.args.size());
  for (const vm_value* x : c.args) items->push_back(*x);
  return vm_tuple(std::move(items));
}

inline vm_value tuple_getitem(const builtin_call& c) {
  const auto* t = c.at(0).get_if<vm_tuple>();
  if (!t || !*t) c.fail(errc::invalid_argument, std::string("argument 0 is a ") + kind_name(c.at(0)) + ", not a tuple");
  const std::int64_t i = c.int_at(1);
  if (i < 0 || static_cast<std::uint64_t>(i) >= (*t)->size()) c.fail(errc::invalid_argument, "item " + std::to_string(i) + " of a tuple of " + std::to_string((*t)->size()));
  return (**t)[static_cast<std::size_t>(i)];
}

/// Tuples are immutable values here: the compiler's hint that an item is no longer
/// needed has nothing to release.
inline vm_value tuple_reset_item(const builtin_call& c) {
  (void)c.at(1);
  return {};
}

inline vm_value tensor_to_shape(const builtin_call& c) {
  const ndarray& t = c.tensor_at(0);
  if (t.ndim() != 1 || t.dtype().code != kDLInt) c.fail(errc::invalid_argument, "tensor_to_shape of " + vm_dtype_name(t.dtype()) + gexec::detail::shape_to_string(t.shape()));
  vm_shape s;
  const auto n = static_cast<std::size_t>(t.shape()[0]);
  for (std::size_t i = 0; i < n; ++i) {
    switch (t.dtype().bits) {
      case 16: s.dims.push_back(static_cast<const std::int16_t*>(t.data())[i]); break;
      case 32: s.dims.push_back(static_cast<const std::int32_t*>(t.data())[i]); break;
      case 64: s.dims.push_back(static_cast<const std::int64_t*>(t.data())[i]); break;
      default: c.fail(errc::invalid_argument, "tensor_to_shape of " + vm_dtype_name(t.dtype()));
    }
  }
  return s;
}

}  // namespace builtin

struct builtin_entry {
  std::string_view name;
  builtin_fn fn;
};

/// Every builtin gexec runs, by the name the compiler calls it.
inline constexpr builtin_entry builtins[] = {
    {"vm.builtin.alloc_shape_heap", &builtin::alloc_shape_heap},
    {"vm.builtin.alloc_storage", &builtin::alloc_storage},
    {"vm.builtin.alloc_tensor", &builtin::alloc_tensor},
    {"vm.builtin.check_func_info", &builtin::check_func_info},
    {"vm.builtin.check_prim_value_info", &builtin::check_prim_value_info},
    {"vm.builtin.check_shape_info", &builtin::check_shape_info},
    {"vm.builtin.check_tensor_info", &builtin::check_tensor_info},
    {"vm.builtin.check_tuple_info", &builtin::check_tuple_info},
    {"vm.builtin.copy", &builtin::copy},
    {"vm.builtin.ensure_zero_offset", &builtin::ensure_zero_offset},
    {"vm.builtin.make_prim_value", &builtin::make_prim_value},
    {"vm.builtin.make_shape", &builtin::make_shape},
    {"vm.builtin.make_tuple", &builtin::make_tuple},
    {"vm.builtin.match_prim_value", &builtin::match_prim_value},
    {"vm.builtin.match_shape", &builtin::match_shape},
    {"vm.builtin.null_value", &builtin::null_value},
    {"vm.builtin.read_if_cond", &builtin::read_if_cond},
    {"vm.builtin.reshape", &builtin::reshape},
    {"vm.builtin.shape_of", &builtin::shape_of},
    {"vm.builtin.tensor_to_shape", &builtin::tensor_to_shape},
    {"vm.builtin.to_device", &builtin::to_device},
    {"vm.builtin.tuple_getitem", &builtin::tuple_getitem},
    {"vm.builtin.tuple_reset_item", &builtin::tuple_reset_item},
};

/// The builtin called `name`, or null.
inline builtin_fn find_builtin(std::string_view name) noexcept {
  for (const builtin_entry& b : builtins)
    if (b.name == name) return b.fn;
  return nullptr;
}

}  // namespace relax

GEXEC_NAMESPACE_END
