#!/usr/bin/env python3
"""Count, per client call window (hoptrace marks), the runtime-trace
events of each traced process: goroutines made runnable (Waiting->Runnable),
created (NotExist->Runnable), syscalls entered, and threads/Ps woken."""
import sys, glob, os, subprocess, re, collections, statistics, datetime, bisect
d = sys.argv[1]
marks = []
for f in glob.glob(os.path.join(d, '*.txt')):
    for l in open(f):
        t, nd, e = l.split()
        marks.append((int(t), e))
marks.sort()
wins = {'acquire': [], 'release': []}
st = {}
for t, e in marks:
    if e in ('c.acq', 'c.rel'): st[e] = t
    elif e == 'c.acq.ret' and 'c.acq' in st: wins['acquire'].append((st.pop('c.acq'), t))
    elif e == 'c.rel.ret' and 'c.rel' in st: wins['release'].append((st.pop('c.rel'), t))
for tf in sorted(glob.glob(os.path.join(d, '*.trace'))):
    out = subprocess.run(['go', 'tool', 'trace', '-d=parsed', tf], capture_output=True, text=True).stdout
    off = None
    evs = []
    for l in out.splitlines():
        if not l.startswith('M='): continue
        m = re.search(r' Time=(\d+)', l)
        if not m: continue
        T = int(m.group(1))
        if off is None and ' Sync ' in l and 'Wall=' in l:
            mono = int(re.search(r'Mono=(\d+)', l).group(1))
            wall = re.search(r'Wall=(\S+)', l).group(1)
            # Wall like 2026-12-05T16:55:34.849960054Z
            sec, frac = wall.rstrip('Z').split('.')
            w = int(datetime.datetime.strptime(sec, '%Y-%m-%dT%H:%M:%S').replace(tzinfo=datetime.timezone.utc).timestamp()) * 10**9 + int(frac.ljust(9, '0'))
            off = w - mono
            continue
        kind = None
        if 'StateTransition' in l and 'GoID=' in l:
            if 'Waiting->Runnable' in l: kind = 'unblock'
            elif 'NotExist->Runnable' in l: kind = 'create'
            elif 'Running->Syscall' in l: kind = 'syscall'
        elif 'StateTransition' in l and 'ProcID=' in l and 'Idle->Running' in l:
            kind = 'P wake'
        if kind: evs.append((T, kind))
    if off is None or not evs: continue
    evs = [(t + off, k) for t, k in evs]
    evs.sort()
    times = [t for t, k in evs]
    lo, hi = times[0], times[-1]
    print(f'== {os.path.basename(tf)}: {len(evs)} events')
    for kind, ws in wins.items():
        ws = [w for w in ws if w[0] >= lo and w[1] <= hi]
        if not ws: continue
        cnt = collections.defaultdict(list)
        for a, b in ws:
            i, j = bisect.bisect_left(times, a), bisect.bisect_right(times, b)
            c = collections.Counter(k for _, k in evs[i:j])
            for k in ('unblock', 'create', 'syscall', 'P wake'):
                cnt[k].append(c[k])
        print(f'  {kind} ({len(ws)} calls): ' + ', '.join(f'{k} {statistics.mean(v):.1f}' for k, v in cnt.items()))
