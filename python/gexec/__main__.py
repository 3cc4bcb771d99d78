"""python -m gexec: the gexec-run command line (the same program, shipped in the wheel).

    python -m gexec model.so --input data=img.npy --output out.npy
    python -m gexec --help
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
