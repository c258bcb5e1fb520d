// process.hpp -- coroutine processes and sub-tasks.
//
//   sim::Process customer(sim::Simulation& sim, sim::Server& desk) {
//     co_await desk.acquire();
//     co_await sim.delay(5 * sim::kNanosecond);
//     desk.release();
//   }
//   sim.spawn("customer0", customer(sim, desk));
//
// A Process is a top-level activity started by Simulation::spawn(); it is
// owned by the simulation, which frees it when it finishes (or when the
// simulation ends while it is still waiting). A Task<T> is a sub-routine a
// process co_awaits for its result; it starts when awaited. Exceptions
// escaping a Process stop the run and surface from run()/step() with the
// process name prefixed; exceptions in a Task propagate to its awaiter.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <utility>

#include "sim/frame_pool.hpp"
#include "sim/simulation.hpp"

namespace kernbench::sim {

class [[nodiscard]] Process {
 public:
  struct promise_type : detail::ProcessNode {
    Process get_return_object() { return Process(std::coroutine_handle<promise_type>::from_promise(*this)); }
    // Suspended at birth: spawn() decides when it first runs.
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> h) const noexcept {
        promise_type& p = h.promise();
        p.sim->retire_process(p);  // unlinks and destroys this frame
      }
      void await_resume() const noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { sim->fail_process(*this, std::current_exception()); }

    static void* operator new(std::size_t n) { return detail::frame_alloc(n); }
    static void operator delete(void* p, std::size_t n) noexcept { detail::frame_free(p, n); }
  };

  Process(Process&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Process& operator=(Process&&) = delete;
  Process(const Process&) = delete;
  ~Process() {
    if (handle_) handle_.destroy();  // never spawned
  }

 private:
  friend class Simulation;
  explicit Process(std::coroutine_handle<promise_type> h) : handle_(h) {}
  std::coroutine_handle<promise_type> release() { return std::exchange(handle_, {}); }

  std::coroutine_handle<promise_type> handle_;
};

namespace detail {

/// Shared by Task<T> and Task<void>: the continuation plumbing.
struct TaskPromiseBase {
  std::coroutine_handle<> continuation;
  std::exception_ptr error;

  std::suspend_always initial_suspend() noexcept { return {}; }
  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) const noexcept {
      // Resumed from the event loop and finished: hand control straight
      // back to the awaiting process (one frame deep, never a chain).
      // Finished synchronously inside await_suspend: return to it.
      auto next = h.promise().continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error = std::current_exception(); }

  static void* operator new(std::size_t n) { return frame_alloc(n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }
};

template <typename Promise>
struct TaskAwaiterBase {
  std::coroutine_handle<Promise> child;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> parent) {
    // Run the child now. If it completes without suspending, the parent
    // continues immediately (no event, no stack growth); otherwise the
    // child resumes the parent when it finishes.
    child.resume();
    if (child.done()) return false;
    child.promise().continuation = parent;
    return true;
  }
};

}  // namespace detail

/// A sub-routine of a process: `T value = co_await some_task(...)`.
template <typename T = void>
class [[nodiscard]] Task {
 public:
  struct promise_type : detail::TaskPromiseBase {
    std::optional<T> value;
    Task get_return_object() { return Task(std::coroutine_handle<promise_type>::from_promise(*this)); }
    template <typename U>
    void return_value(U&& v) {
      value.emplace(std::forward<U>(v));
    }
  };

  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();
  }

  auto operator co_await() && {
    struct Awaiter : detail::TaskAwaiterBase<promise_type> {
      T await_resume() {
        auto& p = this->child.promise();
        if (p.error) std::rethrow_exception(p.error);
        return std::move(*p.value);
      }
    };
    return Awaiter{{handle_}};
  }

 private:
  explicit Task(std::coroutine_handle<promise_type> h) : handle_(h) {}
  std::coroutine_handle<promise_type> handle_;
};

template <>
class [[nodiscard]] Task<void> {
 public:
  struct promise_type : detail::TaskPromiseBase {
    Task get_return_object() { return Task(std::coroutine_handle<promise_type>::from_promise(*this)); }
    void return_void() noexcept {}
  };

  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();
  }

  auto operator co_await() && {
    struct Awaiter : detail::TaskAwaiterBase<promise_type> {
      void await_resume() {
        auto& p = this->child.promise();
        if (p.error) std::rethrow_exception(p.error);
      }
    };
    return Awaiter{{handle_}};
  }

 private:
  explicit Task(std::coroutine_handle<promise_type> h) : handle_(h) {}
  std::coroutine_handle<promise_type> handle_;
};

}  // namespace kernbench::sim
