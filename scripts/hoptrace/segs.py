#!/usr/bin/env python3
"""Per-request hop segments (median and p90 of each request's own
differences, µs) from merged hoptrace files."""
import sys, glob, os, statistics, collections
d = sys.argv[1]
evs = []
for f in glob.glob(os.path.join(d, '*.txt')):
    for line in open(f):
        t, node, ev = line.split()
        evs.append((int(t), node, ev))
evs.sort()
starts = {'c.acq': ('acquire', 'c.acq.ret'), 'c.rel': ('release', 'c.rel.ret')}
segs = {k: collections.defaultdict(list) for k in ('acquire', 'release')}
order = {k: [] for k in segs}
def first(req, name, after=None):
    for t, nd, e in req:
        if e == name and (after is None or t >= after):
            return t
    return None
i, n = 0, len(evs)
while i < n:
    if evs[i][2] not in starts:
        i += 1; continue
    kind, end = starts[evs[i][2]]
    t0 = evs[i][0]
    j = i + 1
    while j < n and evs[j][2] != end and evs[j][2] not in starts:
        j += 1
    if j >= n or evs[j][2] != end:
        i = j; continue
    req = evs[i:j+1]
    T = {}
    T['call'] = t0
    T['c.write'] = first(req, 'c.write')
    T['s.read'] = first(req, 's.read', T['c.write'])
    T['s.wrap'] = first(req, 's.wrap')
    T['s.job'] = first(req, 's.job')
    T['s.intc'] = first(req, 's.intc')
    if kind == 'acquire':
        T['propose'] = first(req, 's.g.prop')
        T['waited'] = first(req, 's.g.propd')
    else:
        T['propose'] = first(req, 's.r.sub')
        T['waited'] = first(req, 's.r.waited')
    T['b.take'] = first(req, 'b.take', T['propose'])
    T['b.fut'] = first(req, 'b.fut', T['propose'])
    # the leader's apply: the last a.apply before 'waited'
    ap = [t for t, nd, e in req if e == "a.apply" and T["waited"] and t <= T["waited"]]
    T['apply'] = ap[-1] if ap else None
    T['s.intc.ret'] = first(req, 's.intc.ret')
    T['s.job.end'] = first(req, 's.job.end')
    T['s.back'] = first(req, 's.back')
    T['s.write'] = first(req, 's.write', T['s.back'])
    T['c.read'] = first(req, 'c.read', T['s.write'])
    T['END'] = req[-1][0]
    nw = sum(1 for t, nd, e in req if e == 's.write' and T['s.back'] and t >= T['s.back'])
    ncw = sum(1 for t, nd, e in req if e == 'c.write')
    ncr = sum(1 for t, nd, e in req if e == 'c.read')
    keys = [k for k in T if T[k] is not None]
    if not order[kind]:
        order[kind] = ['call','c.write','s.read','s.wrap','s.job','s.intc','propose','b.take','apply','b.fut','waited','s.intc.ret','s.job.end','s.back','s.write','c.read','END']
    prev = None
    for k in order[kind]:
        if T.get(k) is None: continue
        if prev is not None:
            segs[kind][f'{prev} → {k}'].append(T[k] - T[prev])
        prev = k
    segs[kind]['TOTAL'].append(T['END'] - t0)
    segs[kind]['#server writes after handler'].append(nw * 1000)
    segs[kind]['#client writes'].append(ncw * 1000)
    segs[kind]['#client reads'].append(ncr * 1000)
    i = j
for kind in ('acquire', 'release'):
    if not segs[kind]: continue
    print(f'== {kind}')
    for k, v in segs[kind].items():
        v = sorted(v)
        print(f'  {statistics.median(v)/1000:8.1f} {v[int(len(v)*.9)]/1000:8.1f} {statistics.mean(v)/1000:8.1f}  {k} ({len(v)})')
