import subprocess, sys
f = sys.argv[1]
lines_to_fix = [int(x) for x in sys.argv[2:]]
# Apply from the bottom so earlier offsets stay valid.
for ln in sorted(lines_to_fix, reverse=True):
    text = open(f).read()
    lines = text.split('\n')
    if ln > len(lines) or len(lines[ln-1]) <= 120: continue
    start = sum(len(l)+1 for l in lines[:ln-1])
    end = start + len(lines[ln-1])
    out = subprocess.run(['npx','--yes','prettier@3','--print-width','120','--single-quote','--stdin-filepath',f,
        '--range-start',str(start),'--range-end',str(end)], input=text, capture_output=True, text=True)
    if out.returncode == 0:
        open(f,'w').write(out.stdout)
    else:
        print('fail', f, ln, out.stderr[:200])
