n = int(input())
sieve = bytearray([1]) * (n + 1)
sieve[0] = sieve[1] = 0
for p in range(2, int(n ** 0.5) + 1):
    if sieve[p]:
        sieve[p * p::p] = bytes(len(range(p * p, n + 1, p)))
print(sum(sieve))
