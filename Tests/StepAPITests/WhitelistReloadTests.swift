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

    @Test("an edit made between reading the configuration and starting to watch it is applied when watching starts")
    func editWhileStarting() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("wl-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        // The configuration was read with one whitelist; the file changed before the watcher was made (the database
        // being opened and checked meanwhile), so the watcher's first stamp is of the new file.
        try Self.write("com.apple.health, com.example.newwatch", to: path)
        let whitelist = SourceWhitelist(["com.apple.health"])
        let logs = LogSink.memory()
        let reloader = WhitelistReloader(
            whitelist: whitelist, reload: Self.reader(path), watchedFile: path, pollIntervalSeconds: 3600,
            logger: Logger(label: "test") { JSONLogHandler(label: $0, sink: logs, level: .info) })
        #expect(await !reloader.reloadIfFileChanged(), "the stamp alone cannot see this edit")
        await reloader.catchUp()
        #expect(whitelist.current == ["com.apple.health", "com.example.newwatch"])
        #expect(logs.lines.contains { $0.contains("changed while starting") })
        // Nothing changed since: the next catch-up writes nothing.
        let lines = logs.lines.count
        await reloader.catchUp()
        #expect(logs.lines.count == lines)
    }

    @Test("a config file reached through a symbolic link is watched through it: swapping the link's target counts")
    func symlinkSwap() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("wl-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // As a Kubernetes ConfigMap volume does it: config.json is a link to data/config.json, and data a link to
        // the current version's folder, which an update swaps; config.json itself never changes.
        for (version, whitelist) in [("v1", "com.apple.health"), ("v2", "com.apple.health, com.example.newwatch")] {
            try FileManager.default.createDirectory(atPath: "\(folder)/\(version)", withIntermediateDirectories: true)
            try Self.write(whitelist, to: "\(folder)/\(version)/config.json")
        }
        let path = "\(folder)/config.json"
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/data", withDestinationPath: "\(folder)/v1")
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "\(folder)/data/config.json")
        let whitelist = SourceWhitelist(["com.apple.health"])
        let reloader = WhitelistReloader(
            whitelist: whitelist, reload: Self.reader(path), watchedFile: path, pollIntervalSeconds: 3600,
            logger: Logger(label: "test") { JSONLogHandler(label: $0, sink: .discard(), level: .info) })
        #expect(await !reloader.reloadIfFileChanged())

        // The update: a new data link renamed over the old one.
        try FileManager.default.createSymbolicLink(atPath: "\(folder)/next", withDestinationPath: "\(folder)/v2")
        #expect(rename("\(folder)/next", "\(folder)/data") == 0)
        #expect(await reloader.reloadIfFileChanged())
        #expect(whitelist.current == ["com.apple.health", "com.example.newwatch"])
    }
}
