import sys

lines = sys.stdin.read().split()
pairs = {')': '(', ']': '[', '}': '{'}
for s in lines[1:1 + int(lines[0])]:
    stack = []
    ok = True
    for c in s:
        if c in '([{':
            stack.append(c)
        elif not stack or stack.pop() != pairs[c]:
            ok = False
            break
    print('YES' if ok and not stack else 'NO')
