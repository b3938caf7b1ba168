import Foundation

/// Writes log lines to a file descriptor from a thread of its own, so a request never waits for a
/// terminal, a pipe or a disk. Lines are appended to a buffer under a lock and the writer thread drains
/// it; `flush()` waits until everything appended so far is written, so nothing is lost at shutdown.
/// The buffer is bounded: past `limit` bytes an appender waits for the writer (back-pressure, no loss).
final class BufferedLogWriter: @unchecked Sendable {
    // Every mutable field below is guarded by `condition`.
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var writing = false
    private let descriptor: Int32
    private let limit: Int

    init(descriptor: Int32, limit: Int = 4 << 20) {
        self.descriptor = descriptor
        self.limit = limit
        pending.reserveCapacity(64 << 10)
        let thread = Thread { [self] in drainForever() }
        thread.name = "stepledger-log-writer"
        thread.start()
    }

    func append(_ line: String) {
        condition.lock()
        while pending.count > limit { condition.wait() }
        pending.append(contentsOf: line.utf8)
        pending.append(UInt8(ascii: "\n"))
        condition.broadcast()
        condition.unlock()
    }

    /// Returns once every line appended before the call has been handed to the kernel.
    func flush() {
        condition.lock()
        while !pending.isEmpty || writing { condition.wait() }
        condition.unlock()
    }

    private func drainForever() {
        var chunk: [UInt8] = []
        while true {
            condition.lock()
            while pending.isEmpty { condition.wait() }
            swap(&chunk, &pending)
            writing = true
            condition.unlock()

            writeAll(chunk)
            chunk.removeAll(keepingCapacity: true)

            condition.lock()
            writing = false
            condition.broadcast()
            condition.unlock()
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return  // the descriptor is gone (a closed pipe): logging must not take the server down
                }
            }
        }
    }
}
