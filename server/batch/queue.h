// A closable queue between glossa-batch's reader, its workers and its writer.
#ifndef GLOSSA_SERVER_BATCH_QUEUE_H_
#define GLOSSA_SERVER_BATCH_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace glossa::batch {

template <typename T>
class Queue {
 public:
  void Push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  // Waits for an item; nullopt once the queue is closed and empty.
  std::optional<T> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !items_.empty() || closed_; });
    return TakeLocked();
  }
  // Waits up to `timeout` for an item.
  std::optional<T> PopFor(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [this] { return !items_.empty() || closed_; });
    return TakeLocked();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::optional<T> TakeLocked() {
    if (items_.empty()) return std::nullopt;
    std::optional<T> item(std::move(items_.front()));
    items_.pop_front();
    return item;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;  // guarded by mu_
  bool closed_ = false;  // guarded by mu_
};

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_QUEUE_H_
