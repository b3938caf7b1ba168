import Foundation
import Logging
import StepAPI
import StepCore
import StepJobs
import StepLogging
import StepSettings
import Testing

/// `ingest.sourceWhitelist` changes without a restart; a bad new configuration keeps the old whitelist.
@Suite("Source whitelist reload")
struct WhitelistReloadTests {
    static func write(_ whitelist: String, to path: String) throws {
        try #"{"ingest": {"sourceWhitelist": "\#(whitelist)"}}"#.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// The server's own reading of the file: the whole configuration, as `stepd serve` re-reads it.
    static func reader(_ path: String) -> @Sendable () async throws -> Set<String> {
        { try ConfigurationSources(file: path).load().limits.sourceBundleWhitelist }
    }

    @Test("a changed config file replaces the whitelist; a bad value is logged and the old one kept")
    func fileChange() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("wl-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.write("com.apple.health", to: path)
        let whitelist = SourceWhitelist(["com.apple.health"])
        let logs = LogSink.memory()
        let reloader = WhitelistReloader(
            whitelist: whitelist, reload: Self.reader(path), watchedFile: path, pollIntervalSeconds: 3600,
            logger: Logger(label: "test") { JSONLogHandler(label: $0, sink: logs, level: .info) })
        // An unchanged file reloads nothing.
        #expect(await !reloader.reloadIfFileChanged())

        try Self.write("com.apple.health, com.example.newwatch", to: path)
        #expect(await reloader.reloadIfFileChanged())
        #expect(whitelist.current == ["com.apple.health", "com.example.newwatch"])

        try Self.write("   ", to: path)
        #expect(await reloader.reloadIfFileChanged())
        #expect(whitelist.current == ["com.apple.health", "com.example.newwatch"])
        #expect(
            logs.lines.contains { $0.contains("keeping the previous one") && $0.contains("ingest.sourceWhitelist") })

        // A direct reload (what SIGHUP triggers) reads the file again.
        try Self.write("com.example.only", to: path)
        await reloader.reloadNow(because: "test")
        #expect(whitelist.current == ["com.example.only"])
    }
}
