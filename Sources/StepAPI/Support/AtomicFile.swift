import Foundation

/// Files `stepd` writes for its user (simulated devices, local keys): whole or not at all, and with their mode
/// from the first byte, so a private key is never readable by others even for a moment.
package enum AtomicFile {
    package struct Failure: Error, Sendable, CustomStringConvertible {
        package var path: String
        package var detail: String
        package var description: String { "cannot write \(path): \(detail)" }
    }

    /// Writes `bytes` to a new file beside `path` created with `mode` (never over an existing one), flushes it to
    /// disk and renames it over `path`; the folder is created owner-only when missing. A failure leaves `path`
    /// as it was and no temporary file behind.
    package static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws(Failure) {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty {
            do {
                try FileManager.default.createDirectory(
                    atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw Failure(path: path, detail: (error as NSError).localizedDescription)
            }
        }
        let temporary = path + ".tmp-\(UUID().uuidString)"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw Failure(path: path, detail: String(cString: strerror(errno))) }
        func fail() -> Failure {
            let failure = Failure(path: path, detail: String(cString: strerror(errno)))
            close(descriptor)
            unlink(temporary)
            return failure
        }
        guard writeAll(bytes, to: descriptor), fsync(descriptor) == 0 else { throw fail() }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let detail = String(cString: strerror(errno))
            unlink(temporary)
            throw Failure(path: path, detail: detail)
        }
    }
}

/// Writes every byte to `descriptor`, again after an interruption; false on an error (`errno` says which).
private func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
    var written = 0
    while written < bytes.count {
        let result = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if result < 0, errno == EINTR { continue }
        guard result > 0 else { return false }
        written += result
    }
    return true
}
