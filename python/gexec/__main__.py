"""python -m gexec: the gexec-run command line (the same program, shipped in the wheel).

    python -m gexec model.so --input data=@img.npy --output out.npz
    python -m gexec model.so --input data=0.5 --benchmark
    python -m gexec --help

An input is NAME=@file.npy (or a raw .bin file), NAME=v1,v2,... or @inputs.npz;
--output writes every output to one .npz file, --output-dir one .npy file each.
"""

import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "gexec-run")
    if not os.path.exists(exe):
        sys.exit("gexec: this build of the package has no gexec-run (it was built without CLI11: "
                 "install libcli11-dev and reinstall)")
    os.execv(exe, ["python -m gexec"] + sys.argv[1:])


if __name__ == "__main__":
    main()
