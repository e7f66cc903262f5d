#!/usr/bin/env python3
"""Per call window, the unblock/create/syscall events of the server trace
grouped by the first frame of their stack (the code that did it)."""
import sys, glob, os, subprocess, re, collections, datetime, bisect
d, tf = sys.argv[1], sys.argv[2]
marks = []
for f in glob.glob(os.path.join(d, '*.txt')):
    for l in open(f):
        t, nd, e = l.split(); marks.append((int(t), e))
marks.sort()
wins = []
st = None
for t, e in marks:
    if e == 'c.acq': st = t
    elif e == 'c.rel.ret' and st: wins.append((st, t)); st = None
out = subprocess.run(['go', 'tool', 'trace', '-d=parsed', tf], capture_output=True, text=True).stdout
off = None
evs = []
cur = None
skip = re.compile(r'^runtime\.|^internal/|^sync\.|^syscall\.|^os\.|^net\.\(\*(netFD|conn)\)|^net\.\(\*rawConn|^internal/poll|^time\.|^context\.|^golang.org/x/sys')
for l in out.splitlines():
    if l.startswith('M='):
        cur = None
        m = re.search(r' Time=(\d+)', l)
        if not m: continue
        T = int(m.group(1))
        if off is None and ' Sync ' in l and 'Wall=' in l:
            mono = int(re.search(r'Mono=(\d+)', l).group(1))
            sec, frac = re.search(r'Wall=(\S+)', l).group(1).rstrip('Z').split('.')
            w = int(datetime.datetime.strptime(sec, '%Y-%m-%dT%H:%M:%S').replace(tzinfo=datetime.timezone.utc).timestamp()) * 10**9 + int(frac.ljust(9, '0'))
            off = w - mono; continue
        kind = None
        if 'StateTransition' in l and 'GoID=' in l:
            if 'Waiting->Runnable' in l: kind = 'unblock'
            elif 'NotExist->Runnable' in l: kind = 'create'
            elif 'Running->Syscall' in l: kind = 'syscall'
        if kind:
            cur = [T, kind, None]
            evs.append(cur)
    elif cur is not None and cur[2] is None and l.startswith('\t') and not l.startswith('\t\t'):
        fn = l.strip().split(' @ ')[0]
        if not skip.search(fn):
            cur[2] = fn
evs = [(t + off, k, s or '?') for t, k, s in evs]
evs.sort()
times = [e[0] for e in evs]
ws = [w for w in wins if w[0] >= times[0] and w[1] <= times[-1]]
c = collections.Counter()
for a, b in ws:
    i, j = bisect.bisect_left(times, a), bisect.bisect_right(times, b)
    for t, k, s in evs[i:j]:
        c[(k, s)] += 1
n = len(ws)
print(f'{n} cycles; per cycle:')
for (k, s), v in c.most_common(45):
    print(f'  {v/n:6.2f} {k:8s} {s}')
