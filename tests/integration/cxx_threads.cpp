// cxx_threads: C++ allocation across threads, with a deterministic output.
//
// Run with and without LD_PRELOAD=libhakmem.so: the printed lines must be
// identical.  new/delete reach malloc/free through libstdc++.
//  - producers build shared_ptr<Item> (std::string, std::vector, std::map
//    inside) and hand them to consumers, which drop the last reference: the
//    objects are destroyed in a thread other than the one that built them;
//  - some items are shared by two consumers at once (the last one to finish
//    destroys it, whichever that is);
//  - whole containers are built in one thread and destroyed in another;
//  - each thread also churns short-lived strings and vectors.
// Checksums are sums (mod 2^64) of per-item hashes: independent of the order
// in which threads run.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

std::uint64_t fnv(const void *data, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (std::size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

struct Item {
  std::uint64_t id;
  std::string name;
  std::vector<std::uint32_t> values;
  std::map<std::string, int> attrs;
  std::unique_ptr<std::list<std::string>> notes;

  std::uint64_t hash() const {
    std::uint64_t h = fnv(&id, sizeof id);
    h = fnv(name.data(), name.size(), h);
    h = fnv(values.data(), values.size() * sizeof(std::uint32_t), h);
    for (const auto &kv : attrs) {
      h = fnv(kv.first.data(), kv.first.size(), h);
      h = fnv(&kv.second, sizeof kv.second, h);
    }
    for (const auto &s : *notes) h = fnv(s.data(), s.size(), h);
    return h;
  }
};

std::atomic<std::uint64_t> destroyed{0};
std::atomic<std::uint64_t> destroyed_hash{0};

struct ItemDeleter {
  void operator()(Item *it) const {
    destroyed_hash.fetch_add(it->hash(), std::memory_order_relaxed);
    destroyed.fetch_add(1, std::memory_order_relaxed);
    delete it;
  }
};

std::shared_ptr<Item> make_item(std::uint64_t id) {
  std::uint64_t x = id * 6364136223846793005ull + 1442695040888963407ull;
  auto *it = new Item;
  it->id = id;
  it->name = "item-" + std::to_string(id) + std::string(x % 97, static_cast<char>('a' + id % 26));
  it->values.resize(1 + x % 300);
  for (std::size_t i = 0; i < it->values.size(); i++) it->values[i] = static_cast<std::uint32_t>(x >> (i % 32)) + static_cast<std::uint32_t>(i);
  for (int k = 0; k < static_cast<int>(x % 9); k++) it->attrs["attr" + std::to_string(k * 37 + id % 11)] = k;
  it->notes.reset(new std::list<std::string>);
  for (int k = 0; k < static_cast<int>(x % 5); k++) it->notes->push_back(std::string(20 + k * 50, 'n'));
  return std::shared_ptr<Item>(it, ItemDeleter());
}

template <class T>
class Channel {
 public:
  void put(T v) {
    std::unique_lock<std::mutex> lk(mu_);
    not_full_.wait(lk, [&] { return q_.size() < 512; });
    q_.push_back(std::move(v));
    not_empty_.notify_one();
  }
  bool get(T &out) {
    std::unique_lock<std::mutex> lk(mu_);
    not_empty_.wait(lk, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return false;
    out = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return true;
  }
  void close() {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
    not_empty_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<T> q_;
  bool closed_ = false;
};

constexpr int kProducers = 2;
constexpr int kConsumers = 2;
constexpr std::uint64_t kItemsPerProducer = 60000;

}  // namespace

int main() {
  Channel<std::shared_ptr<Item>> ch;
  std::atomic<std::uint64_t> seen_hash{0}, seen{0}, churn_hash{0};
  std::atomic<int> producers_left{kProducers};

  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; p++) {
    threads.emplace_back([&, p] {
      for (std::uint64_t i = 0; i < kItemsPerProducer; i++) {
        std::uint64_t id = static_cast<std::uint64_t>(p) * kItemsPerProducer + i;
        auto it = make_item(id);
        // Every 7th item is shared by two consumers: it is sent twice.
        if (id % 7 == 0) ch.put(it);
        ch.put(std::move(it));
      }
      if (producers_left.fetch_sub(1) == 1) ch.close();
    });
  }
  for (int c = 0; c < kConsumers; c++) {
    threads.emplace_back([&] {
      std::shared_ptr<Item> it;
      std::uint64_t local = 0, n = 0, churn = 0;
      while (ch.get(it)) {
        local += it->hash();
        n++;
        // Short-lived temporaries in the consumer.
        std::string s = it->name + "/" + std::to_string(it->values.size());
        std::vector<std::string> parts;
        for (const auto &kv : it->attrs) parts.push_back(kv.first + "=" + std::to_string(kv.second));
        for (const auto &part : parts) s += part;
        churn += fnv(s.data(), s.size());
        it.reset();  // drop this consumer's reference
      }
      seen_hash.fetch_add(local);
      seen.fetch_add(n);
      churn_hash.fetch_add(churn);
    });
  }
  for (auto &t : threads) t.join();
  threads.clear();

  // Containers built in one thread, destroyed in another.
  std::uint64_t map_sum = 0;
  for (int round = 0; round < 4; round++) {
    std::unordered_map<std::string, std::vector<int>> table;
    std::map<int, std::string> tree;
    std::thread builder([&] {
      for (int i = 0; i < 40000; i++) {
        table["k" + std::to_string(i * 31 + round)].assign(static_cast<std::size_t>(i % 40), i);
        tree.emplace(i * 17 % 100003, std::string(static_cast<std::size_t>(i % 100), 't'));
      }
    });
    builder.join();
    std::uint64_t sum = 0;
    std::thread destroyer([&] {
      for (const auto &kv : tree) sum += static_cast<std::uint64_t>(kv.first) * kv.second.size();
      sum += table.size();
      std::unordered_map<std::string, std::vector<int>>().swap(table);
      std::map<int, std::string>().swap(tree);
    });
    destroyer.join();
    map_sum += sum;
  }

  const std::uint64_t total = kProducers * kItemsPerProducer;
  const std::uint64_t shared_count = (total + 6) / 7;
  std::printf("items %llu received %llu (shared %llu)\n", static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(seen.load()), static_cast<unsigned long long>(shared_count));
  std::printf("destroyed %llu\n", static_cast<unsigned long long>(destroyed.load()));
  std::printf("received-hash %016llx\n", static_cast<unsigned long long>(seen_hash.load()));
  std::printf("destroyed-hash %016llx\n", static_cast<unsigned long long>(destroyed_hash.load()));
  std::printf("churn-hash %016llx\n", static_cast<unsigned long long>(churn_hash.load()));
  std::printf("containers %llu\n", static_cast<unsigned long long>(map_sum));
  // Self-checks that hold under any allocator.
  int rc = 0;
  if (seen.load() != total + shared_count) {
    std::fprintf(stderr, "FAIL: received %llu items, expected %llu\n",
                 static_cast<unsigned long long>(seen.load()),
                 static_cast<unsigned long long>(total + shared_count));
    rc = 1;
  }
  if (destroyed.load() != total) {
    std::fprintf(stderr, "FAIL: destroyed %llu items, expected %llu\n",
                 static_cast<unsigned long long>(destroyed.load()), static_cast<unsigned long long>(total));
    rc = 1;
  }
  return rc;
}
