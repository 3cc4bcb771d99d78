#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_api (tests/fuzz/corpus/api): call sequences in the
byte format fuzz_api.cpp decodes, one file per area of the API, so that replaying the
seeds goes through every operation and the refusals the reference predicts.

    python3 tests/fuzz/make_api_seeds.py [output-dir]
"""

import os
import sys

# Option bits (byte 0).
W_PARAM, COMPILED_ZEROS, LIVENESS_ZEROS = 1, 2, 4

# Input selectors: 0, 1 by index; 2, 3 by name; 4 an index out of range; 5 an unknown name.
X, W, X_NAME, W_NAME, BAD_INDEX, BAD_NAME = range(6)


def val(v):
    assert -8 <= v <= 8
    return v + 8


def vals(vs):
    assert len(vs) == 8
    return [val(v) for v in vs]


def pos(buffer, position):
    """A caller position: buffer 0..2, 32-byte position 0..7 (even ones 64-byte aligned)."""
    return position * 3 + buffer


def set_input(e, sel, vs):
    return [0, e, sel, 0] + vals(vs)


def set_input_from(e, sel, p):
    return [0, e, sel, 1, p]


def set_input_bad(e, sel, kind):  # kind 2: wrong shape, 3: wrong dtype
    return [0, e, sel, kind]


def set_input_zc(e, sel, p, shape=0):  # shape 6: wrong shape, 7: wrong dtype
    return [1, e, sel, p, shape]


def set_output_zc(e, o, p, shape=0):
    return [2, e, o, p, shape]


def load_params(e, x=None, w=None, nobody=False, x_wrong=False, w_wrong=False, w_first=False):
    flags = (1 if x is not None or x_wrong else 0) | (2 if w is not None or w_wrong else 0)
    flags |= (4 if nobody else 0) | (8 if x_wrong else 0) | (16 if w_wrong else 0) | (32 if w_first else 0)
    out = [3, e, flags]
    order = [(w, w_wrong), (x, x_wrong)] if w_first else [(x, x_wrong), (w, w_wrong)]
    for vs, wrong in order:
        if vs is not None and not wrong:
            out += vals(vs)
    return out


def share(e, other, names):  # names 0: w, 1: x, 2: both, 3: none
    return [4, e, other, names]


def run(e, parallel=False):
    return [5, e, 1 if parallel else 0]


def get_output(e, o):
    return [6, e, o]


def copy_output_to(e, o, dst, p=0):  # dst 0: new tensor, 1: caller memory, 2: wrong shape
    return [7, e, o, dst, p]


def get_input(e, i):
    return [8, e, i]


def write(p, vs):
    return [9, p] + vals(vs)


def move(frm, to):
    return [10, frm, to]


def instantiate(e, liveness):
    return [11, e, 1 if liveness else 0]


def debug(e, entry):
    return [12, e, entry]


def info(e):
    return [13, e]


def all_outputs(e):
    out = []
    for o in range(9):
        out += get_output(e, o)
    return out


A = [1, 2, 3, 4, -1, -2, 0, 5]
B = [2, -3, 1, 0, 4, -1, 2, 1]
C = [-4, 0, 3, 3, -2, 1, 6, -7]

seeds = {}

seeds["basic"] = [W_PARAM] + set_input(0, X, A) + run(0) + all_outputs(0) + get_input(0, 0) + get_input(0, 1) + \
    get_input(0, 2) + info(0) + info(1) + info(2) + set_input(1, X_NAME, B) + run(1) + all_outputs(1) + \
    set_input(0, BAD_INDEX, A) + set_input(0, BAD_NAME, A) + set_input_bad(0, X, 2) + set_input_bad(0, W, 3) + \
    set_input_from(0, X, pos(0, 1)) + run(0) + all_outputs(0)

seeds["unset_inputs"] = [0] + run(0) + debug(0, 6) + set_input(0, X, A) + run(0) + load_params(0, w=B) + run(0) + \
    all_outputs(0) + run(2) + set_input(2, W_NAME, C) + run(2) + info(2) + set_input(2, X_NAME, A) + run(2) + \
    all_outputs(2) + get_input(1, 0) + get_input(1, 1)

seeds["zero_unset_inputs"] = [COMPILED_ZEROS | LIVENESS_ZEROS] + all_outputs(0) + run(0) + all_outputs(0) + run(2, True) + \
    all_outputs(2) + debug(1, 5) + get_output(1, 2) + get_output(1, 3) + set_input(1, W, B) + run(1) + all_outputs(1)

seeds["zero_copy_inputs"] = [W_PARAM] + write(pos(0, 0), A) + set_input_zc(0, X, pos(0, 0)) + run(0) + all_outputs(0) + \
    write(pos(0, 0), C) + run(0) + all_outputs(0) + get_input(0, 0) + set_input_zc(0, X, pos(0, 1)) + \
    set_input_zc(0, X, pos(0, 2), 6) + set_input_zc(0, W, pos(0, 2), 7) + set_input_zc(0, W_NAME, pos(0, 0)) + \
    run(0) + all_outputs(0) + set_input(0, X, B) + run(0) + all_outputs(0) + write(pos(0, 0), B) + run(0) + \
    get_output(0, 0) + set_input_zc(2, X_NAME, pos(1, 4)) + set_input_zc(2, BAD_NAME, pos(1, 4)) + \
    set_input_zc(2, W, pos(1, 4)) + run(2) + all_outputs(2)

seeds["zero_copy_outputs"] = [W_PARAM] + set_input(0, X, A)
for o in range(8):
    seeds["zero_copy_outputs"] += set_output_zc(0, o, pos(o % 3, 2 * (o // 3)))
seeds["zero_copy_outputs"] += run(0) + all_outputs(0) + write(pos(0, 0), C) + get_output(0, 0) + \
    copy_output_to(0, 0, 0) + copy_output_to(0, 0, 1, pos(2, 7)) + set_output_zc(0, 0, pos(1, 6)) + get_output(0, 0) + \
    run(0) + all_outputs(0) + set_output_zc(0, 8, pos(0, 0)) + set_output_zc(0, 3, pos(0, 6), 6) + \
    set_output_zc(0, 1, pos(0, 6), 7) + set_output_zc(0, 2, pos(0, 5))
for o in range(9):
    seeds["zero_copy_outputs"] += copy_output_to(0, o, 0) + copy_output_to(0, o, 1, pos(2, 5)) + copy_output_to(0, o, 2)
seeds["zero_copy_outputs"] += run(0, True) + all_outputs(0)

seeds["overlap_refused"] = [W_PARAM] + set_input(0, X, A) + set_input_zc(0, X, pos(0, 0)) + set_output_zc(0, 0, pos(0, 0)) + \
    set_output_zc(0, 4, pos(0, 0)) + set_output_zc(0, 2, pos(1, 0)) + set_input_zc(0, W, pos(1, 0)) + \
    set_output_zc(0, 3, pos(0, 0)) + set_output_zc(0, 4, pos(2, 0)) + write(pos(2, 0), B) + set_input_zc(0, X, pos(2, 0)) + \
    run(0) + run(0) + all_outputs(0) + set_output_zc(0, 3, pos(2, 0)) + run(0) + run(0) + all_outputs(0) + \
    set_input_zc(0, W, pos(2, 0)) + set_output_zc(0, 6, pos(2, 2)) + run(0, True) + all_outputs(0)

seeds["params"] = [W_PARAM] + load_params(0, w=B) + set_input(0, X, A) + set_input(1, X, A) + share(1, 0, 0) + run(1) + \
    all_outputs(1) + load_params(0, w=C) + run(1) + get_output(1, 0) + load_params(0, x=B, w=A, nobody=True, w_first=True) + \
    run(1) + info(0) + info(1) + load_params(0, x=C, w_wrong=True) + load_params(0, x_wrong=True, w=C) + run(0) + \
    all_outputs(0) + share(2, 1, 2) + run(2) + all_outputs(2) + share(0, 2, 0) + run(0) + share(2, 2, 2) + \
    set_input(2, X, C) + run(2) + all_outputs(2) + share(1, 1, 3) + load_params(2) + load_params(2, nobody=True) + \
    share(0, 2, 1) + run(0) + get_output(0, 4) + info(2)

seeds["parallel"] = [W_PARAM | LIVENESS_ZEROS] + set_input(0, X, A) + run(0, True) + all_outputs(0) + set_input(2, X, B) + \
    run(2, True) + all_outputs(2) + set_output_zc(0, 0, pos(0, 0)) + set_output_zc(0, 6, pos(0, 2)) + \
    set_output_zc(0, 7, pos(0, 4)) + run(0, True) + all_outputs(0) + set_output_zc(0, 6, pos(0, 0)) + run(0, True) + \
    all_outputs(0) + set_output_zc(2, 2, pos(1, 0)) + set_output_zc(2, 1, pos(1, 2)) + set_input_zc(2, W, pos(1, 4)) + \
    write(pos(1, 4), C) + run(2, True) + all_outputs(2) + run(1, True)

seeds["move"] = [W_PARAM] + set_input(0, X, A) + load_params(0, w=B) + share(1, 0, 2) + move(0, 2) + run(0) + get_output(0, 0) + \
    set_input(0, X, A) + set_input_zc(0, X, pos(0, 0)) + set_output_zc(0, 0, pos(0, 2)) + load_params(0, w=A) + \
    share(0, 2, 0) + share(2, 0, 0) + share(2, 0, 3) + copy_output_to(0, 0, 0) + get_input(0, 0) + debug(0, 2) + \
    info(0) + run(1) + all_outputs(1) + run(2) + all_outputs(2) + instantiate(2, True) + run(1) + get_output(1, 2) + \
    instantiate(0, True) + set_input(0, X, C) + run(0) + all_outputs(0) + move(1, 0) + move(0, 1) + info(0) + run(1)

seeds["debug_get_output"] = [W_PARAM] + set_input(0, X, A) + set_output_zc(0, 2, pos(0, 0)) + set_output_zc(0, 1, pos(0, 2)) + \
    set_output_zc(0, 3, pos(0, 4))
for entry in range(10):
    seeds["debug_get_output"] += debug(0, entry) + all_outputs(0) + debug(1, entry) + get_output(1, 2) + get_output(1, 3)

seeds["cross_executor_aliasing"] = [W_PARAM] + set_input(0, X, A) + set_output_zc(0, 0, pos(0, 0)) + \
    set_input_zc(1, X, pos(0, 0)) + run(0) + run(1) + all_outputs(1) + set_input_zc(2, X, pos(1, 0)) + \
    set_input(2, W, B) + write(pos(1, 0), C) + share(0, 2, 1) + set_output_zc(0, 6, pos(1, 0)) + run(0) + \
    all_outputs(0) + run(0, True) + run(2) + all_outputs(2) + set_output_zc(0, 2, pos(0, 0)) + run(0) + run(0, True) + \
    all_outputs(0) + share(2, 2, 1) + set_output_zc(2, 7, pos(1, 0)) + run(2) + run(2, True) + all_outputs(2)

seeds["copy_path_outputs"] = [W_PARAM] + set_input(0, X, A) + set_output_zc(0, 1, pos(0, 0)) + \
    set_output_zc(0, 7, pos(0, 2)) + run(0) + all_outputs(0) + set_output_zc(0, 1, pos(0, 4)) + run(0) + all_outputs(0) + \
    set_output_zc(0, 7, pos(0, 6)) + set_output_zc(0, 1, pos(1, 0)) + run(0) + all_outputs(0) + write(pos(0, 6), C) + \
    get_output(0, 7) + copy_output_to(0, 7, 0) + copy_output_to(0, 1, 1, pos(2, 0)) + set_input_zc(0, X, pos(0, 6)) + \
    run(0) + run(0) + all_outputs(0) + set_output_zc(0, 5, pos(2, 2)) + set_output_zc(0, 4, pos(2, 4)) + run(0) + \
    all_outputs(0) + set_input(0, W, C) + get_output(0, 5) + copy_output_to(0, 5, 0) + set_input_zc(0, W, pos(2, 2)) + run(0)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "api")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        assert all(0 <= b < 256 for b in data), name
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(data))


if __name__ == "__main__":
    main()
