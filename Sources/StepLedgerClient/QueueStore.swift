import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The queue's folder on disk: `queue.json`, replaced whole on every change (written to a new file, flushed to the
/// device with `fsync`, `F_FULLFSYNC` on Apple's platforms, renamed over the old one, and the folder flushed too), so a crash at any instant leaves
/// either the old state or the new one, never half of either. `queue.lock` keeps a second client off the folder.
/// A state equal to the one last read or written is not written again, so callers save after every change
/// without paying an `fsync` for none. Used only from the client's actor.
final class QueueStore: @unchecked Sendable {
    let directory: URL
    private let lockDescriptor: Int32
    private let encoder: JSONEncoder
    private let decoder = JSONDecoder()
    /// What the file holds now, as far as this process knows.
    private var onDisk: QueueState?
    /// Where `load` moved a `queue.json` it could not decode, if it did.
    private(set) var setAside: URL?

    /// Opens (creating it if needed) the folder and takes its lock, or throws
    /// ``StepLedgerError/storeUnavailable(_:)``.
    init(directory: URL) throws {
        self.directory = directory
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw StepLedgerError.storeUnavailable("cannot create \(directory.path): \(error.localizedDescription)")
        }
        let lockPath = directory.appendingPathComponent("queue.lock").path
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StepLedgerError.storeUnavailable("cannot open \(lockPath): \(Self.lastError())")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw StepLedgerError.storeUnavailable("another StepLedgerClient holds \(directory.path)")
        }
        lockDescriptor = descriptor
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .millisecondsSince1970
        decoder.dateDecodingStrategy = .millisecondsSince1970
    }

    deinit {
        flock(lockDescriptor, LOCK_UN)
        close(lockDescriptor)
    }

    private var file: URL { directory.appendingPathComponent("queue.json") }

    /// The stored state, or an empty one when nothing was ever stored. A file that is not a queue at all (its bytes
    /// damaged outside the client, which never leaves half a file) is renamed `queue.json.unreadable-<ms>` and the
    /// client starts with an empty queue rather than refusing to open for good; a queue of another version, or a
    /// file that cannot be read, still throws.
    func load() throws -> QueueState {
        guard FileManager.default.fileExists(atPath: file.path) else { return QueueState() }
        let bytes: Data
        do {
            bytes = try Data(contentsOf: file)
        } catch {
            throw StepLedgerError.storeUnavailable("cannot read \(file.path): \(error.localizedDescription)")
        }
        do {
            // The version first, alone: a newer client's queue may have another shape, which is not damage.
            let version = try decoder.decode(QueueVersion.self, from: bytes).version
            guard version == QueueState.currentVersion else {
                throw StepLedgerError.storeUnavailable("\(file.path) has version \(version)")
            }
            let state = try decoder.decode(QueueState.self, from: bytes)
            onDisk = state
            return state
        } catch let error as StepLedgerError {
            throw error
        } catch {
            let milliseconds = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
            let aside = directory.appendingPathComponent("queue.json.unreadable-\(milliseconds)")
            guard rename(file.path, aside.path) == 0 else { throw failure("rename \(file.path)") }
            setAside = aside
            return QueueState()
        }
    }

    /// Makes `state` durable before returning.
    func save(_ state: QueueState) throws {
        guard state != onDisk else { return }
        let bytes: Data
        do {
            bytes = try encoder.encode(state)
        } catch {
            throw StepLedgerError.storeUnavailable("cannot encode the queue: \(error.localizedDescription)")
        }
        let temporary = directory.appendingPathComponent("queue.json.new").path
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("open \(temporary)") }
        var written = 0
        let total = bytes.count
        while written < total {
            let result = bytes.withUnsafeBytes { raw in
                write(descriptor, raw.baseAddress! + written, total - written)
            }
            if result < 0, errno == EINTR { continue }
            guard result > 0 else {
                let error = failure("write \(temporary)")
                close(descriptor)
                throw error
            }
            written += result
        }
        guard Self.flushToStorage(descriptor) else {
            let error = failure("fsync \(temporary)")
            close(descriptor)
            throw error
        }
        close(descriptor)
        guard rename(temporary, file.path) == 0 else { throw failure("rename \(temporary)") }
        let folder = open(directory.path, O_RDONLY | O_CLOEXEC)
        guard folder >= 0 else { throw failure("open \(directory.path)") }
        defer { close(folder) }
        guard Self.flushToStorage(folder) else { throw failure("fsync \(directory.path)") }
        onDisk = state
    }

    /// Flushes what was written to `descriptor` (a file, or a folder after a rename in it) to stable storage. On
    /// Apple's platforms `fsync` only hands the data to the drive, which may hold it in its cache, and write it out
    /// of order, past a power loss: the rename could then outlive the bytes it points to, and the next launch would
    /// set the whole queue aside. `F_FULLFSYNC` makes the drive flush too; where a file system does not support it,
    /// `fsync` is what is left.
    private static func flushToStorage(_ descriptor: Int32) -> Bool {
        #if canImport(Darwin)
            if fcntl(descriptor, F_FULLFSYNC) == 0 { return true }
        #endif
        return fsync(descriptor) == 0
    }

    private func failure(_ what: String) -> StepLedgerError {
        .storeUnavailable("cannot \(what): \(Self.lastError())")
    }

    private static func lastError() -> String { String(cString: strerror(errno)) }
}

/// The one field every version of the queue file has.
private struct QueueVersion: Decodable {
    let version: Int
}
