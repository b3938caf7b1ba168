import Foundation

/// Writes log lines to a file descriptor off the caller's thread, so a request never waits for a terminal, a
/// pipe or a disk. Lines are appended to a buffer under a lock; the first append to an idle buffer schedules
/// a drain on a serial dispatch queue, which writes until the buffer is empty. No thread of its own is kept,
/// so the process can always exit. `flush()` waits until everything appended so far is written, so nothing
/// is lost at shutdown. The buffer is bounded: past `limit` bytes an appender waits (back-pressure, no loss).
final class BufferedLogWriter: @unchecked Sendable {
    // Every mutable field below is guarded by `condition`.
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var draining = false
    private let descriptor: Int32
    private let limit: Int
    private let queue = DispatchQueue(label: "stepledger.log-writer")

    init(descriptor: Int32, limit: Int = 4 << 20) {
        self.descriptor = descriptor
        self.limit = limit
    }

    func append(_ line: String) {
        condition.lock()
        while pending.count > limit { condition.wait() }
        pending.append(contentsOf: line.utf8)
        pending.append(UInt8(ascii: "\n"))
        let schedules = !draining
        draining = true
        condition.unlock()
        if schedules { queue.async { self.drain() } }
    }

    /// Returns once every line appended before the call has been handed to the kernel.
    func flush() {
        condition.lock()
        while draining { condition.wait() }
        condition.unlock()
    }

    private func drain() {
        var chunk: [UInt8] = []
        while true {
            condition.lock()
            if pending.isEmpty {
                draining = false
                condition.broadcast()
                condition.unlock()
                return
            }
            swap(&chunk, &pending)
            condition.broadcast()  // room in the buffer again
            condition.unlock()

            writeAll(chunk)
            chunk.removeAll(keepingCapacity: true)
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
