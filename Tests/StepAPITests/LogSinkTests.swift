import Foundation
import StepCore
import Synchronization
import Testing

@testable import StepAPI
@testable import StepLogging

@Suite("Buffered log sink")
struct LogSinkTests {
    @Test("lines reach the file in order, and flush waits for all of them")
    func fileOrder() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("log-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = try LogSink.file(path)
        let lines = (0..<5_000).map { #"{"n":\#($0),"msg":"line"}"# }
        for line in lines { sink.write(line) }
        sink.flush()
        let written = try String(contentsOfFile: path, encoding: .utf8)
        #expect(written == lines.joined(separator: "\n") + "\n")
    }

    @Test("log.antiCheatSink's names are read in any case, not as files in the working directory")
    func sinkNames() throws {
        for name in ["stdout", "STDOUT", "Stdout"] {
            #expect(try LogSink.named(name) === LogSink.standardOutput, "\(name)")
        }
        for name in ["stderr", "StdErr"] { #expect(try LogSink.named(name) === LogSink.standardError, "\(name)") }
        for name in ["off", "OFF", "Off"] { #expect(try LogSink.named(name).isDiscarding, "\(name)") }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("Verdicts-\(UUID().uuidString).log")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try LogSink.named(path)
        #expect(!file.isDiscarding)
        #expect(FileManager.default.fileExists(atPath: path), "any other value is a file's path, its case kept")
    }

    @Test("a stream nobody reads does not block the caller")
    func slowReaderDoesNotBlock() throws {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        defer { close(descriptors[0]) }
        let writer = BufferedLogWriter(descriptor: descriptors[1])
        // 1 MiB, far more than a pipe holds (64 KiB): a direct write would block until someone reads.
        let line = String(repeating: "x", count: 1023)
        let done = DispatchSemaphore(value: 0)
        Thread {
            for _ in 0..<1_024 { writer.append(line) }
            done.signal()
        }.start()
        #expect(done.wait(timeout: .now() + 10) == .success, "append blocked on a full pipe")
        // Drain the pipe so the writer thread can finish what it holds.
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var total = 0
        while total < 1_024 * 1_024 {
            let count = buffer.withUnsafeMutableBytes { read(descriptors[0], $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            total += count
        }
        #expect(total == 1_024 * 1_024)
        writer.flush()
    }

    @Test("a reader that stops reading never stops the caller: lines past the buffer are dropped, counted and reported")
    func stalledReaderDropsLines() throws {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        defer { close(descriptors[0]) }
        let writer = BufferedLogWriter(descriptor: descriptors[1], limit: 256 << 10)
        // 4 MiB against a 64 KiB pipe and a 256 KiB buffer, nobody reading: before, the 300-odd-th line waited.
        let line = String(repeating: "x", count: 1023)
        let done = DispatchSemaphore(value: 0)
        Thread {
            for _ in 0..<4_096 { writer.append(line) }
            done.signal()
        }.start()
        #expect(done.wait(timeout: .now() + 10) == .success, "append waited for a reader that stopped reading")
        // Lines dropped since the last note of them: on a slow machine the drain may take the buffer while lines
        // are being dropped, and the next line appended then carries a note of those first. When it took the
        // buffer near the end, the last lines fit and none is counted since (the note is then in what it holds).
        let dropped = writer.droppedLines
        #expect(!writer.flush(timeout: 0.2), "flush gives up on a reader that stopped reading")

        // The reader comes back: what the buffer held arrives, then the next line says how many were dropped.
        let received = Mutex<[UInt8]>([])
        let finished = DispatchSemaphore(value: 0)
        let readEnd = descriptors[0]
        Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                received.withLock { $0 += buffer[..<count] }
            }
            finished.signal()
        }.start()
        #expect(writer.flush(timeout: 10))
        writer.append("after")
        #expect(writer.flush(timeout: 10))
        close(descriptors[1])
        #expect(finished.wait(timeout: .now() + 10) == .success)
        let lines = String(decoding: received.withLock { $0 }, as: UTF8.self).split(separator: "\n")
        #expect(lines.last == "after")
        if dropped > 0 {
            // The lines dropped last are reported by the first line appended once the reader is back.
            let note = try #require(lines.dropLast().last)
            let fields = try JSONDecoder().decode(JSONValue.self, from: Data(note.utf8))
            #expect(fields["level"] == .string("warning"))
            #expect(fields["dropped"] == .int(dropped))
        }
        #expect(writer.droppedLines == 0)
        // Every line is either received or counted in a note: nothing is lost without a word.
        let notes = try lines.filter { $0.hasPrefix("{") }.map {
            try JSONDecoder().decode(JSONValue.self, from: Data($0.utf8))
        }
        let reported = notes.reduce(0) { total, note in
            guard case .int(let count)? = note["dropped"] else { return total }
            return total + count
        }
        #expect(lines.filter { $0 == line }.count + reported == 4_096)
        #expect(reported > 3_000, "the buffer and the pipe hold a few hundred lines; the rest are dropped")
    }
}
