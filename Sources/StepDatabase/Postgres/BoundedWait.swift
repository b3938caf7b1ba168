import Synchronization

/// Runs `work` in a task of its own and waits for it at most `limit` (none when `limit` is not positive); past that
/// the caller goes on and the work finishes unwaited: it is not cancelled.
package func awaitAtMost(_ limit: Duration, _ work: @escaping @Sendable () async -> Void) async {
    guard limit > .zero else {
        Task { await work() }
        return
    }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let resumption = ResumeOnce(continuation)
        let watch = DeadlineWatch.shared
        let timer = watch.register(after: limit) { resumption.resume() }
        Task {
            await work()
            watch.cancel(timer)
            resumption.resume()
        }
    }
}

/// A continuation the first of several callers resumes; the others find it resumed.
private final class ResumeOnce: Sendable {
    private let continuation: Mutex<CheckedContinuation<Void, Never>?>

    init(_ continuation: CheckedContinuation<Void, Never>) {
        self.continuation = Mutex(continuation)
    }

    func resume() {
        continuation.withLock { $0.take() }?.resume()
    }
}
