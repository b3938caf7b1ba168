import Foundation
import StepCore

/// Writes log lines to a file descriptor off the caller's thread, so a request never waits for a terminal, a
/// pipe or a disk. Lines are appended to a buffer under a lock; the first append to an idle buffer schedules
/// a drain on a serial dispatch queue, which writes until the buffer is empty. No thread of its own is kept,
/// so the process can always exit. `flush()` waits until everything appended so far is written, so nothing
/// is lost at a normal shutdown.
///
/// The buffer is bounded: past `limit` bytes a line is dropped and counted, never waited for. A reader that keeps
/// the pipe open and stops reading (a log collector that is down under Docker's blocking mode, a paused terminal,
/// a stuck `tee`) would otherwise stop every request at its log line, `/livez` included. When the buffer has
/// room again, one line says how many were dropped.
final class BufferedLogWriter: @unchecked Sendable {
    // Every mutable field below is guarded by `condition`.
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var draining = false
    /// Lines dropped since the last note of it.
    private var dropped = 0
    private let descriptor: Int32
    private let limit: Int
    private let queue = DispatchQueue(label: "stepledger.log-writer")

    init(descriptor: Int32, limit: Int = 4 << 20) {
        self.descriptor = descriptor
        self.limit = limit
    }

    /// Lines dropped so far because the buffer was full (and not yet reported in the output).
    var droppedLines: Int {
        condition.lock()
        defer { condition.unlock() }
        return dropped
    }

    func append(_ line: String) {
        condition.lock()
        guard pending.count <= limit else {
            dropped += 1
            condition.unlock()
            return
        }
        if dropped > 0 {
            pending.append(contentsOf: Self.droppedNote(dropped).utf8)
            pending.append(UInt8(ascii: "\n"))
            dropped = 0
        }
        pending.append(contentsOf: line.utf8)
        pending.append(UInt8(ascii: "\n"))
        let schedules = !draining
        draining = true
        condition.unlock()
        if schedules { queue.async { self.drain() } }
    }

    /// The line that reports dropped lines, in the JSON form of the service's other lines (`JSONLogHandler`).
    static func droppedNote(_ count: Int) -> String {
        let fields: [String: JSONValue] = [
            "ts": .string(InstantParser.format(Date(), fractional: true)), "level": .string("warning"),
            "label": .string("stepledger.log"), "msg": .string("log output was not read: lines dropped"),
            "dropped": .int(count),
        ]
        return (try? JSONCoding.encode(JSONValue.object(fields))) ?? #"{"msg":"log lines dropped"}"#
    }

    /// Returns once every line appended before the call has been handed to the kernel, or when `timeout` has
    /// passed (a reader that stopped reading must not hold the process at its exit); whether all was written.
    @discardableResult
    func flush(timeout: TimeInterval = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while draining {
            if !condition.wait(until: deadline) { return false }
        }
        return true
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
