import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A consistent copy of a SQLite database that may be serving: `VACUUM INTO` on a connection of its own reads one
/// snapshot (a read transaction: in WAL mode the writer goes on, and checkpoints catch up once it ends) and writes
/// it as a new, compact database file. The copy is written beside the destination under a temporary name, checked,
/// fsynced and renamed into place, so the destination is either the old file or the whole copy, never a part.
package enum SQLiteBackup {
    /// What a backup wrote.
    package struct Report: Sendable, Hashable {
        package var bytes: Int
    }

    /// Why a backup was not made; the user can fix it.
    package struct Failure: Error, Hashable, CustomStringConvertible {
        package var description: String
    }

    /// Copies the database at `source` to `destination`, refusing to replace an existing file unless `replacing`.
    package static func copy(databaseAt source: String, to destination: String, replacing: Bool) async throws
        -> Report
    {
        let files = FileManager.default
        guard files.fileExists(atPath: source) else {
            throw Failure(description: "no SQLite database at \(source)")
        }
        let target = URL(fileURLWithPath: destination)
        let directory = target.deletingLastPathComponent()
        var isDirectory: ObjCBool = false
        guard files.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw Failure(description: "no directory \(directory.path) for \(destination)")
        }
        var destinationIsDirectory: ObjCBool = false
        if files.fileExists(atPath: destination, isDirectory: &destinationIsDirectory) {
            // A folder (`--to /backups`, as `cp` takes it) cannot be replaced by the copy, --force or not.
            guard !destinationIsDirectory.boolValue else {
                throw Failure(description: "\(destination) is a directory: give the path of the file to write")
            }
            guard replacing else { throw Failure(description: "\(destination) exists; pass --force to replace it") }
            guard
                URL(fileURLWithPath: source).standardizedFileURL.resolvingSymlinksInPath()
                    != target.standardizedFileURL.resolvingSymlinksInPath()
            else { throw Failure(description: "\(destination) is the database itself") }
        }
        // The partial copy's name carries this process's id: a copy left by a backup that was killed (its process
        // gone) is removed by the next one into the same folder, whatever file that one writes (backups named by
        // date each write another), so repeated interrupted runs do not fill the disk.
        removeAbandoned(in: directory.path)
        let temporary = directory.appendingPathComponent(
            ".\(target.lastPathComponent)\(partialMarker)\(getpid())-\(UUID().uuidString.prefix(8))"
        ).path
        let executor = ThreadExecutor(name: "sqlite-backup")
        do {
            try await withTaskExecutorPreference(executor) {
                try vacuum(source, into: temporary)
                try check(temporary)
            }
            try await executor.shutdown()
            try synchronize(file: temporary)
            try publish(temporary, as: destination, replacing: replacing)
            try synchronize(directory: directory.path)
        } catch {
            try? await executor.shutdown()
            try? files.removeItem(atPath: temporary)
            try? files.removeItem(atPath: temporary + "-journal")
            throw error
        }
        let size = try files.attributesOfItem(atPath: destination)[.size] as? Int ?? 0
        return Report(bytes: size)
    }

    /// What a partial copy's name holds between the destination's name and `<pid>-<8 characters>`.
    static let partialMarker = ".partial-"

    /// Moves the checked copy to `destination`. Without `replacing`, a file that appeared there while the copy was
    /// written (another backup to the same name, say) is refused as one that was there before, not replaced: a
    /// hard link fails on an existing name where a rename would replace it. A file system without hard links
    /// falls back to checking, then renaming.
    package static func publish(_ temporary: String, as destination: String, replacing: Bool) throws {
        if !replacing {
            if link(temporary, destination) == 0 {
                unlink(temporary)
                return
            }
            let reason = errno
            guard reason != EEXIST else {
                throw Failure(description: "\(destination) exists; pass --force to replace it")
            }
            guard [EPERM, ENOTSUP, EOPNOTSUPP, EMLINK].contains(reason) else {
                throw Failure(
                    description: "cannot move the copy to \(destination): \(String(cString: strerror(reason)))")
            }
            guard !FileManager.default.fileExists(atPath: destination) else {
                throw Failure(description: "\(destination) exists; pass --force to replace it")
            }
        }
        guard rename(temporary, destination) == 0 else {
            throw Failure(description: "cannot move the copy to \(destination): \(String(cString: strerror(errno)))")
        }
    }

    /// A backup's partial copy, by its name: `.<file>.partial-<pid>-<8 characters>`, or its `-journal`.
    package struct PartialCopy: Equatable {
        /// The process the name says wrote it; nil when its digits are no pid.
        package var pid: pid_t?
    }

    /// The partial copy `name` is, or nil for a name that is none.
    package static func partialCopy(_ name: String) -> PartialCopy? {
        guard name.hasPrefix("."), let marker = name.range(of: partialMarker, options: .backwards) else {
            return nil
        }
        var rest = name[marker.upperBound...]
        if rest.hasSuffix("-journal") { rest = rest.dropLast("-journal".count) }
        guard let dash = rest.firstIndex(of: "-"), !rest[..<dash].isEmpty,
            rest[..<dash].allSatisfy(\.isASCII), rest[..<dash].allSatisfy(\.isNumber),
            rest[rest.index(after: dash)...].count == 8
        else { return nil }
        return PartialCopy(pid: pid_t(rest[..<dash]))
    }

    /// Removes the partial copies in `directory` (of any backup's file) that no backup is writing: untouched for a
    /// day, or untouched for ten minutes and named `….partial-<pid>-…` for a process that no longer runs here. A
    /// copy being written is touched all the time, so one of a backup in another container (its pid means nothing
    /// here) is left alone; one of a killed backup whose pid was reused, or that ran as pid 1 in a container, goes
    /// after a day.
    package static func removeAbandoned(in directory: String, now: Date = Date()) {
        let files = FileManager.default
        guard let names = try? files.contentsOfDirectory(atPath: directory) else { return }
        for name in names {
            guard let partial = partialCopy(name) else { continue }
            let path = (directory as NSString).appendingPathComponent(name)
            guard let modified = (try? files.attributesOfItem(atPath: path))?[.modificationDate] as? Date else {
                continue
            }
            let idle = now.timeIntervalSince(modified)
            // kill(pid, 0) fails with ESRCH only when no such process exists.
            let gone = partial.pid.map { $0 > 0 && kill($0, 0) != 0 && errno == ESRCH } ?? true
            guard idle > 86_400 || (idle > 600 && gone) else { continue }
            try? files.removeItem(atPath: path)
        }
    }

    /// `VACUUM INTO` on a connection of its own. The server's writer may hold the write lock for a moment; the
    /// copy waits for it as the server's other connections do. The copy is made readable by its owner only (it
    /// holds walkers' health data and the service's development keys), from its creation on, whatever the umask:
    /// `VACUUM INTO` writes into an empty file that exists.
    private static func vacuum(_ source: String, into temporary: String) throws {
        let created = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard created >= 0 else {
            throw Failure(description: "cannot create \(temporary): \(String(cString: strerror(errno)))")
        }
        close(created)
        let handle = try SQLiteHandle.open(path: source, create: false)
        defer { handle.close() }
        try handle.run("PRAGMA busy_timeout = 5000", binds: []) { _ in }
        try handle.run("VACUUM INTO ?", binds: [temporary]) { _ in }
    }

    /// The copy must pass SQLite's own structural check before it replaces anything.
    private static func check(_ path: String) throws {
        let handle = try SQLiteHandle.open(path: path, create: false)
        defer { handle.close() }
        var result: [String] = []
        try handle.run("PRAGMA quick_check", binds: []) { row in
            if case .text(let line) = row.values.first { result.append(line) }
        }
        guard result == ["ok"] else {
            throw Failure(description: "the copy failed its check: \(result.prefix(3).joined(separator: "; "))")
        }
    }

    private static func synchronize(file path: String) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.synchronize()
    }

    /// The rename is durable once the directory that holds it is.
    private static func synchronize(directory path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw Failure(description: "cannot sync \(path): \(String(cString: strerror(errno)))")
        }
    }
}
