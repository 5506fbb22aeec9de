#!/usr/bin/env python3
"""Level-1 data misses per instruction of one object, from a callgrind file that
tests/bench/count.py wrote (it runs callgrind with --dump-instr=yes), per call: which
loads of the launch path miss, to be named with `objdump -d` at the printed addresses (a
RIP-relative load names its static).

Usage: python3 misses_by_instruction.py target/count/callgrind/callgrind.PID-01 libstreamsan_shim CALLS
(CALLS: the hook's calls in the run, from count.py's table). Prints read misses, write misses
and executions per call, the address and the function, the dearest first."""
import re,sys,collections
path, obj_sub, per = sys.argv[1], sys.argv[2], float(sys.argv[3])
events=None; names={'ob':{}, 'fn':{}, 'fl':{}}
cur={'ob':None,'fn':None}
cost=collections.defaultdict(lambda:[0]*13)
fnof={}
last=0; skip_next=False
def parse_name(kind,val):
    m=re.match(r'\((\d+)\)(?: (.*))?',val)
    if m:
        if m.group(2) is not None: names[kind][m.group(1)]=m.group(2)
        return names[kind].get(m.group(1))
    return val
for line in open(path):
    line=line.rstrip('\n')
    if line.startswith('events:'): events=line.split()[1:]; continue
    m=re.match(r'^(ob|fn|fl|fi|fe|cob|cfn|cfi|cfl)=(.*)',line)
    if m:
        k=m.group(1)
        kind={'ob':'ob','cob':'ob','fn':'fn','cfn':'fn','fl':'fl','fi':'fl','fe':'fl','cfi':'fl','cfl':'fl'}[k]
        v=parse_name(kind,m.group(2))
        if k in ('ob','fn'): cur[k]=v
        continue
    if line.startswith('calls='): skip_next=True; continue
    if not line or not (line[0] in '+-*0123456789'): continue
    parts=line.split()
    a=parts[0]
    if a=='*': addr=last
    elif a[0] in '+-': addr=last+int(a,16) if a.startswith(('+0x','-0x')) else last+int(a)
    else: addr=int(a,16) if a.startswith('0x') else int(a)
    last=addr
    if skip_next: skip_next=False; continue
    if cur['ob'] is None or obj_sub not in cur['ob']: continue
    # subposition: instr line -> parts[1] is line
    vals=parts[2:]
    c=cost[addr]
    for i,v in enumerate(vals): c[i]+=int(v)
    fnof[addr]=cur['fn']
ir=events.index('Ir'); r=events.index('D1mr'); w=events.index('D1mw')
rows=[(c[r]/per,c[w]/per,c[ir]/per,a,fnof[a]) for a,c in cost.items() if (c[r]+c[w])/per>=0.3]
rows.sort(key=lambda x:-(x[0]+x[1]))
for x in rows[:80]: print(f"{x[0]:5.2f} {x[1]:5.2f} {x[2]:6.2f} {x[3]:#x} {x[4][:110]}")
