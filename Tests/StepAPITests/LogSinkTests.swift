import Foundation
import StepCore
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
}
