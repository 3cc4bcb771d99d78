"""The containers TVM's Python API returns, as tvm.container and tvm.runtime.container
name them: Map (get_input_info's and get_output_info's dictionaries, get_graph_params),
ShapeTuple (a shape) and String (a dtype). Each is the Python built-in it stands for (dict,
tuple, str), so code written for either TVM or plain Python works with them."""

__all__ = ["Map", "ShapeTuple", "String"]


class Map(dict):
    """A mapping from names to values, as tvm.container.Map (a dict)."""

    __slots__ = ()


class ShapeTuple(tuple):
    """A shape, as tvm.runtime.container.ShapeTuple: a tuple of ints that, as TVM's, equals
    any sequence of the same ints (a list or a tuple)."""

    __slots__ = ()

    def __new__(cls, shape=()):
        if not isinstance(shape, (list, tuple)):
            raise TypeError("ShapeTuple takes a list or tuple of ints, not %s" % type(shape).__name__)
        dims = []
        for d in shape:
            if isinstance(d, bool) or not hasattr(d, "__index__"):
                raise TypeError("ShapeTuple dimensions are ints, not %s" % type(d).__name__)
            dims.append(d.__index__())
        return super().__new__(cls, dims)

    def __eq__(self, other):
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tuple.__hash__


class String(str):
    """A string, as tvm.runtime.container.String (a str)."""

    __slots__ = ()
