"""tandem's PEP 517 build backend: `pip install .` and `make wheel` (docs/python.md).

It needs nothing from PyPI (no build requirement: CMake, the compiler and the Debian packages of
scripts/install-deps.sh do the work). The wheel holds the `tandem` package: the Python files, the
extension module `_tandem`, the program `tandem/bin/tandem`, its tokenizer module and every
shared library they load that is not part of the C and C++ runtime, in `tandem/lib`, found there
by an RPATH of $ORIGIN: it installs into a venv on another Debian 12 x86-64 machine without a
compiler or tandem's build packages.

The build tree is TANDEM_BUILD_DIR when set, else build-pip/ in the source tree (kept: a second
`pip install .` rebuilds nothing; ccache, when installed, serves a fresh clone the objects an
earlier build compiled). Only the module and the program are built: no tests, benchmarks or
fuzzers; CUDA when TANDEM_PIP_CUDA=1, MPI when TANDEM_PIP_MPI=1 (their libraries are not
bundled: a wheel built with them needs the CUDA toolkit or Open MPI where it runs).
"""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

NAME = "tandem"
VERSION = "0.1.0"
SUMMARY = "tandem's data loader and weights for PyTorch training loops"
# The C and C++ runtime every Debian system has: never bundled.
SYSTEM_LIBS = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so",
               "libgcc_s.so", "libstdc++.so", "libutil.so", "libresolv.so")
# The CUDA toolkit's and Open MPI's libraries (TANDEM_PIP_CUDA, TANDEM_PIP_MPI, or a reused
# make build tree): the machine that runs them has its own, matched to its driver and network.
NOT_BUNDLED = ("libcuda.so", "libcudart.so", "libcublas", "libcudnn", "libcufft", "libcurand", "libcusolver",
               "libcusparse", "libnvrtc", "libnvJitLink", "libnvToolsExt", "libnccl", "libmpi", "libopen-pal",
               "libopen-rte")


def _source_dir():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _flag(name):
    return os.environ.get(name, "0") not in ("", "0", "OFF", "off", "no")


def _run(cmd, **kw):
    print("tandem_build: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def _cache_value(build, name):
    """NAME's value in BUILD's CMakeCache.txt (None when unset)."""
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.rstrip("\n").split("=", 1)[1]
    return None


def _reuse(src, build, env):
    """A tree configured by someone else (make build's build/, named by TANDEM_BUILD_DIR): built as
    it is configured (its tests, CUDA, MPI and warnings stay), with only the module and the
    wheel's link turned on there; never configured with this backend's arguments."""
    python = _cache_value(build, "Python3_EXECUTABLE") or "/usr/bin/python3"
    version = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True).stdout.split()
    if version != [str(sys.version_info.major), str(sys.version_info.minor)]:
        raise RuntimeError(f"TANDEM_BUILD_DIR {build}: its module is built for {python} (Python "
                           f"{'.'.join(version) or '?'}), not this pip's Python {sys.version_info.major}."
                           f"{sys.version_info.minor}: install into a venv of {python}, or unset TANDEM_BUILD_DIR")
    if _cache_value(build, "TANDEM_PYTHON") != "ON" or _cache_value(build, "TANDEM_WHEEL") != "ON":
        _run(["cmake", "-S", src, "-B", build, "-DTANDEM_PYTHON=ON", "-DTANDEM_WHEEL=ON"], env=env)


def _build(src):
    build = os.path.abspath(os.environ.get("TANDEM_BUILD_DIR") or os.path.join(src, "build-pip"))
    python = os.path.realpath(sys.executable)  # a venv's python: its base interpreter, whose headers exist
    cmake = ["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DTANDEM_TESTS=OFF",
             "-DTANDEM_BENCH=OFF", "-DTANDEM_FUZZ=OFF", "-DTANDEM_PYTHON=ON", "-DTANDEM_WHEEL=ON",
             "-DPython3_EXECUTABLE=" + python,
             "-DTANDEM_CUDA=" + ("ON" if _flag("TANDEM_PIP_CUDA") else "OFF"),
             "-DTANDEM_MPI=" + ("ON" if _flag("TANDEM_PIP_MPI") else "OFF")]
    if shutil.which("ninja") and not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        cmake += ["-G", "Ninja"]  # a new tree: ninja checks an up-to-date one in a fraction of make's time
    env = dict(os.environ)
    if shutil.which("ccache"):
        cmake += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
                  "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
        # Paths under the source tree hash as relative ones: another clone hits the same objects.
        env.setdefault("CCACHE_BASEDIR", src)
        env.setdefault("CCACHE_NOHASHDIR", "true")
    # A tree configured with these arguments before is not configured again (cmake --build
    # reconfigures by itself when a CMakeLists.txt changed): a second install only builds. One
    # that TANDEM_BUILD_DIR names and this backend did not configure (make build's) is reused.
    stamp = os.path.join(build, "tandem-build-args.txt")
    args = "\n".join(a for a in cmake if a not in ("-G", "Ninja")) + "\n"
    configured = os.path.exists(os.path.join(build, "CMakeCache.txt"))
    if configured and not os.path.exists(stamp) and os.environ.get("TANDEM_BUILD_DIR"):
        _reuse(src, build, env)
    elif not (configured and os.path.exists(stamp) and open(stamp).read() == args):
        _run(cmake, env=env)
        with open(stamp, "w") as f:
            f.write(args)
    jobs = os.environ.get("TANDEM_JOBS") or str(os.cpu_count() or 1)
    _run(["cmake", "--build", build, "-j", jobs, "--target", "_tandem", "tandem", "tandem_sentencepiece"], env=env)
    return build


def _resolved(path):
    """soname -> file of every library `path` loads (ldd: the whole tree)."""
    found = {}
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if "=>" not in parts:
            continue
        name, target = parts[0], parts[parts.index("=>") + 1]
        if target == "not":
            raise RuntimeError(f"{path}: {name} is not found (ldd): install it first (scripts/install-deps.sh)")
        found[name] = target
    return found


def _needed(path):
    """The sonames `path` names itself (its DT_NEEDED entries)."""
    out = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def _dependencies(paths):
    """The shared libraries `paths` load, less the C and C++ runtime and the CUDA and MPI
    libraries with what only they load (a CUDA or MPI build needs those where it runs)."""
    where, found, todo = {}, {}, list(paths)
    while todo:
        p = todo.pop()
        where.update(_resolved(p))
        for name in _needed(p):
            if name in found or name.startswith(SYSTEM_LIBS + NOT_BUNDLED):
                continue
            found[name] = where[name]
            todo.append(where[name])
    return found


def _stage(build, root):
    _run(["cmake", "--install", build, "--component", "python", "--prefix", root])
    pkg = os.path.join(root, NAME)
    lib = os.path.join(pkg, "lib")
    os.makedirs(lib, exist_ok=True)
    binaries = [os.path.join(pkg, "bin", "tandem")]
    binaries += [os.path.join(pkg, f) for f in os.listdir(pkg) if f.startswith("_tandem") and f.endswith(".so")]
    binaries += [os.path.join(lib, f) for f in os.listdir(lib) if f.endswith(".so")]
    for name, target in sorted(_dependencies(binaries).items()):
        shutil.copy2(target, os.path.join(lib, name))  # under its soname: what the loader asks for
        os.chmod(os.path.join(lib, name), 0o755)


def _tag():
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{platform}"


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\nSummary: {SUMMARY}\n"
            "Requires-Python: >=3.9\n")


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def _write_wheel(root, wheel_directory, level):
    tag = _tag()
    dist_info = f"{NAME}-{VERSION}.dist-info"
    path = os.path.join(wheel_directory, f"{NAME}-{VERSION}-{tag}.whl")
    records = []
    os.makedirs(wheel_directory, exist_ok=True)
    method = zipfile.ZIP_DEFLATED if level > 0 else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as z:
        def add(arc, data, mode=0o644):
            info = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = method
            z.writestr(info, data, compresslevel=level if level > 0 else None)
            records.append(_record_line(arc, data))
        for d, _, files in sorted(os.walk(os.path.join(root, NAME))):
            for f in sorted(files):
                full = os.path.join(d, f)
                with open(full, "rb") as fh:
                    add(os.path.relpath(full, root), fh.read(), os.stat(full).st_mode & 0o777)
        add(f"{dist_info}/METADATA", _metadata().encode())
        wheel = f"Wheel-Version: 1.0\nGenerator: tandem_build\nRoot-Is-Purelib: false\nTag: {tag}\n"
        add(f"{dist_info}/WHEEL", wheel.encode())
        record = "\n".join(records + [f"{dist_info}/RECORD,,"]) + "\n"
        z.writestr(f"{dist_info}/RECORD", record)
    return os.path.basename(path)


# PEP 517 hooks.
def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = f"{NAME}-{VERSION}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata())
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None, level=0):
    """level: the zip compression (0: stored, as pip install . unpacks it at once; make wheel: 6)."""
    src = _source_dir()
    build = _build(src)
    with tempfile.TemporaryDirectory(prefix="tandem-wheel-") as root:
        _stage(build, root)
        name = _write_wheel(root, wheel_directory, level)
    print(f"tandem_build: wrote {os.path.join(wheel_directory, name)}", flush=True)
    return name


if __name__ == "__main__":  # make wheel: python3 python/build_backend/tandem_build.py DIST
    build_wheel(sys.argv[1] if len(sys.argv) > 1 else "dist", level=6)
