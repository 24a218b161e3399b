#!/usr/bin/env python3
"""NVSHMEM's latency perftests with the device API switch on and off, from a selftest results dir (issue 23).

    python3 bench/device-api/perftest_latency.py SELFTEST_DIR [SIZE ...]

SELFTEST_DIR holds device_api.<program>.on/rank0.log and .off/rank0.log, as `selftest --checks device_api` leaves them
(bench/device-api/gpu-run.sh packs them in selftest-results.tgz). Each perftest prints blocks of `#name`, a header
and `size scope latency` rows; PE 0's rows are read. Prints a markdown table of every latency program run both ways:
on, off and on/off at each SIZE (default 8 4096 65536, where the program measured it), per scope.
"""
import pathlib
import re
import sys

ROW = re.compile(r"^(\d+)\s+(\w+)\s+([0-9.]+)\s*$")


def latencies(log: pathlib.Path) -> dict:
    out, name = {}, None
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("#"):
            name = line[1:].strip()
            continue
        m = ROW.match(line)
        if name and m:
            out[(name, m[2], int(m[1]))] = float(m[3])
    return out


def main() -> None:
    d = pathlib.Path(sys.argv[1])
    sizes = [int(s) for s in sys.argv[2:]] or [8, 4096, 65536]
    print("| program | block | scope | size (B) | on (us) | off (us) | on / off |")
    print("|---|---|---|---:|---:|---:|---:|")
    for on_dir in sorted(d.glob("device_api.*latency*.on")):
        prog = on_dir.name[len("device_api."):-len(".on")]
        off_log = d / f"device_api.{prog}.off" / "rank0.log"
        if not off_log.exists() or not (on_dir / "rank0.log").exists():
            continue
        on, off = latencies(on_dir / "rank0.log"), latencies(off_log)
        for key in sorted(k for k in on if k in off and k[2] in sizes):
            a, b = on[key], off[key]
            print(f"| {prog} | {key[0]} | {key[1]} | {key[2]} | {a:.1f} | {b:.1f} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
