import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// The source-bundle whitelist the ingest checks and reconciliation judge against, replaceable while the server
/// or the worker runs.
package final class SourceWhitelist: Sendable {
    private let entries: Mutex<Set<String>>

    package init(_ entries: Set<String>) {
        self.entries = Mutex(entries)
    }

    package var current: Set<String> { entries.withLock { $0 } }

    package func replace(with new: Set<String>) {
        entries.withLock { $0 = new }
    }
}

/// Re-reads `ingest.sourceWhitelist` without a restart (SPEC: the whitelist is configuration that changes
/// with no code change and no restart): on SIGHUP, and when the config file's modification time or size
/// changes. A configuration that no longer reads (a bad value anywhere) is logged and the old whitelist kept.
package struct WhitelistReloader: Service {
    let whitelist: SourceWhitelist
    let reload: @Sendable () async throws -> Set<String>
    let watchedFile: String?
    let pollIntervalSeconds: Double
    let logger: Logger
    /// The file as it was last seen, first when the configuration was read (at construction): any later change
    /// counts, even one made before the service starts watching.
    private let lastSeen: LastSeenStamp

    package init(
        whitelist: SourceWhitelist, reload: @escaping @Sendable () async throws -> Set<String>, watchedFile: String?,
        pollIntervalSeconds: Double, logger: Logger
    ) {
        self.whitelist = whitelist
        self.reload = reload
        self.watchedFile = watchedFile
        self.pollIntervalSeconds = pollIntervalSeconds
        self.logger = logger
        self.lastSeen = LastSeenStamp(watchedFile.flatMap(Self.stamp))
    }

    package func run() async throws {
        await catchUp()
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in await UnixSignalsSequence(trapping: .sighup) {
                        await reloadNow(because: "SIGHUP")
                    }
                }
                if watchedFile != nil {
                    group.addTask {
                        while !Task.isCancelled {
                            try? await Task.sleep(for: .seconds(pollIntervalSeconds))
                            await reloadIfFileChanged()
                        }
                    }
                }
            }
        }
    }

    /// Reloads when the watched file's modification time or size differs from when it was last seen; returns
    /// whether it did (the service calls this every poll interval; tests call it directly).
    @discardableResult
    package func reloadIfFileChanged() async -> Bool {
        guard let watchedFile else { return false }
        let stamp = Self.stamp(watchedFile)
        guard lastSeen.replace(with: stamp) != stamp else { return false }
        await reloadNow(because: "config file changed")
        return true
    }

    /// At the start of watching: the file is first stamped when this service is made, which comes after the
    /// configuration was read (the database opened and checked in between), so an edit made meanwhile would be
    /// taken as the baseline and never applied. The whitelist is read again once; a change is applied and logged.
    package func catchUp() async {
        await reloadNow(because: "changed while starting", quietWhenUnchanged: true)
    }

    /// Reads the whitelist again and puts it in place, logging the outcome (with `quietWhenUnchanged`, only a
    /// change or a failure).
    package func reloadNow(because trigger: String, quietWhenUnchanged: Bool = false) async {
        do {
            let new = try await reload()
            let old = whitelist.current
            if quietWhenUnchanged, new == old { return }
            whitelist.replace(with: new)
            logger.info(
                "source whitelist reloaded",
                metadata: [
                    "trigger": .string(trigger), "entries": "\(new.count)", "changed": "\(new != old)",
                ])
        } catch {
            logger.warning(
                "source whitelist not reloaded; keeping the previous one",
                metadata: ["trigger": .string(trigger), "error": .string(String(describing: error))])
        }
    }

    /// The file's resolved path, inode, modification time and size, so an edit that keeps the size or the time
    /// still counts as a change. Read through symbolic links: a configuration mounted from a Kubernetes ConfigMap,
    /// or deployed with `ln -sfn`, changes by swapping a link's target, which leaves the named link as it was.
    private static func stamp(_ path: String) -> [String]? {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: resolved) else { return nil }
        return [
            resolved,
            (attributes[.systemFileNumber] as? NSNumber).map { "\($0)" } ?? "",
            (attributes[.modificationDate] as? Date).map { "\($0.timeIntervalSince1970)" } ?? "",
            (attributes[.size] as? NSNumber).map { "\($0)" } ?? "",
        ]
    }
}

/// The watched file's last stamp, shared by the copies of the service value.
private final class LastSeenStamp: Sendable {
    private let stamp: Mutex<[String]?>

    init(_ stamp: [String]?) {
        self.stamp = Mutex(stamp)
    }

    /// Stores `new` and returns the stamp it replaced.
    func replace(with new: [String]?) -> [String]? {
        stamp.withLock { old in
            defer { old = new }
            return old
        }
    }
}
