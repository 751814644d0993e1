n = int(input())
sieve = bytearray([1]) * n
sieve[0] = sieve[1] = 0
for p in range(2, int(n ** 0.5) + 1):
    if sieve[p]:
        sieve[p * p::p] = bytes(len(range(p * p, n, p)))
print(sum(sieve))
