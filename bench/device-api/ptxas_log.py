"""What `ptxas -v` says per function: {mangled name: (stack frame bytes, spill stores + loads bytes)}. Shared by
ptxas_frames.py and perftest_regs.py."""
import re


def parse(path):
    d, cur = {}, None
    for line in open(path):
        m = re.search(r"Compiling entry function '(\S+)'|Function properties for (\S+)", line)
        if m:
            cur = m.group(1) or m.group(2)
            continue
        m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads', line)
        if m and cur:
            d[cur] = (int(m.group(1)), int(m.group(2)) + int(m.group(3)))
    return d
