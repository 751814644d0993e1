#include <cstdio>
#include <thread>
#include <vector>
#include <atomic>
int main() {
    int n; if (scanf("%d", &n) != 1) return 1;
    std::atomic<long long> total{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; t++)
        pool.emplace_back([&total, n, t] { total += (t == 0) ? n : 0; });
    for (auto &th : pool) th.join();
    printf("%lld\n", total.load());
    return 0;
}
