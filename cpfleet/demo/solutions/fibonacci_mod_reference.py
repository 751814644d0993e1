M = 10**9 + 7

def fib(n: int) -> tuple[int, int]:
    # fast doubling: returns (F(n), F(n+1))
    if n == 0:
        return 0, 1
    a, b = fib(n >> 1)
    c = a * (2 * b - a) % M
    d = (a * a + b * b) % M
    return (d, (c + d) % M) if n & 1 else (c, d)

print(fib(int(input()))[0])
