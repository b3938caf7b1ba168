import Foundation

/// A private PostgreSQL cluster a test can stop and start (for outage tests), built with the server
/// binaries `scripts/with-postgres` found. Runs as the postgres OS user when the tests run as root.
///
/// Its tools (initdb, pg_ctl, openssl) run on a thread of their own: waiting for one on a cooperative thread (two on
/// two cores) held half the tests' threads for seconds, and a test beside it saw its own timers late.
package final class ThrowawayCluster: Sendable {
    package let port: Int
    let directory: String
    let bindir: String
    let runAsPostgres: Bool
    let tls: Bool

    /// With `tls`: the PEM certificate of the authority that signed the server's certificate, which names
    /// `localhost` (and not 127.0.0.1).
    package var rootCertificateFile: String { directory + "/ca.crt" }

    package var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=disable" }

    package static var isAvailable: Bool {
        ProcessInfo.processInfo.environment["STEPLEDGER_TEST_POSTGRES_BINDIR"] != nil
    }

    /// A new cluster, started; with `tls`, serving TLS with a certificate for `localhost` from an authority of its own.
    package init(tls: Bool = false) async throws {
        guard let bindir = ProcessInfo.processInfo.environment["STEPLEDGER_TEST_POSTGRES_BINDIR"] else {
            throw ClusterError(message: "STEPLEDGER_TEST_POSTGRES_BINDIR is not set")
        }
        self.bindir = bindir
        self.directory = NSTemporaryDirectory() + "stepledger-outage-\(UUID().uuidString)"
        self.runAsPostgres = getuid() == 0
        self.tls = tls
        self.port = try Self.freePort()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if runAsPostgres { try await Self.run("/bin/chown", ["postgres", directory]) }
        try await execute("initdb", ["-D", directory + "/data", "-U", "postgres", "--auth=trust", "--no-instructions"])
        if tls { try await makeCertificates() }
        try await start()
    }

    /// An authority and a server certificate it signs for `localhost`, with openssl; the server's key is the
    /// server's own (PostgreSQL refuses a key others can read).
    private func makeCertificates() async throws {
        let openssl = "/usr/bin/openssl"
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await Self.run(
            openssl,
            ["req", "-x509"] + key + [
                "-days", "2", "-subj", "/CN=StepLedger test authority", "-keyout", directory + "/ca.key", "-out",
                rootCertificateFile,
            ])
        try await Self.run(
            openssl,
            ["req"] + key + [
                "-subj", "/CN=localhost", "-keyout", directory + "/server.key", "-out", directory + "/server.csr",
            ])
        try "subjectAltName=DNS:localhost\n".write(toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try await Self.run(
            openssl,
            [
                "x509", "-req", "-in", directory + "/server.csr", "-CA", rootCertificateFile, "-CAkey",
                directory + "/ca.key", "-CAcreateserial", "-days", "2", "-extfile", directory + "/server.ext", "-out",
                directory + "/server.crt",
            ])
        try await Self.run("/bin/chmod", ["600", directory + "/server.key"])
        if runAsPostgres {
            try await Self.run("/bin/chown", ["postgres", directory + "/server.key", directory + "/server.crt"])
        }
    }

    package func start() async throws {
        try await execute(
            "pg_ctl",
            [
                "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60", "-o",
                "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off"
                    + (tls
                        ? " -c ssl=on -c ssl_cert_file=\(directory)/server.crt -c ssl_key_file=\(directory)/server.key"
                        : ""),
                "start",
            ])
    }

    package func stop() async throws {
        try await execute("pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
    }

    /// The server's processes: the postmaster (the first line of `postmaster.pid`) and every process it started.
    package func processes() throws -> [pid_t] {
        let pidFile = try String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8)
        guard let postmaster = pidFile.split(separator: "\n").first.flatMap({ pid_t($0) }) else {
            throw ClusterError(message: "no postmaster pid in \(directory)/data/postmaster.pid")
        }
        var found = [postmaster]
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc") {
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After the command's closing parenthesis: the state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == postmaster { found.append(pid) }
        }
        return found
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) every process of the server: stopped, its connections stay open and
    /// answer nothing, as a server whose machine froze or whose network drops packets silently.
    package func signalAll(_ signal: Int32) throws {
        for pid in try processes() { _ = kill(pid, signal) }
    }

    /// Stops the cluster and removes its folder: for a `defer`, so it waits here (an immediate stop is quick).
    package func destroy() {
        try? Self.runHere(
            tool("pg_ctl"), arguments(["-D", directory + "/data", "-m", "immediate", "-w", "stop"], of: "pg_ctl"))
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func execute(_ name: String, _ arguments: [String]) async throws {
        try await Self.run(tool(name), self.arguments(arguments, of: name))
    }

    /// The executable that runs server tool `name`: itself, or runuser as the postgres user.
    private func tool(_ name: String) -> String { runAsPostgres ? "/usr/sbin/runuser" : bindir + "/" + name }

    /// `arguments` for `tool(name)`.
    private func arguments(_ arguments: [String], of name: String) -> [String] {
        runAsPostgres ? ["-u", "postgres", "--", bindir + "/" + name] + arguments : arguments
    }

    /// Runs `executable` to its end on a thread of its own.
    private static func run(_ executable: String, _ arguments: [String]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let thread = Thread {
                do {
                    try runHere(executable, arguments)
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }

    /// posix_spawn and waitpid directly: Foundation's Process misses the child's exit under the test runner.
    private static func runHere(_ executable: String, _ arguments: [String]) throws {
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw ClusterError(message: "cannot start \(executable): \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else {
            throw ClusterError(
                message: "\(executable) \(arguments.joined(separator: " ")) failed with status \(status)")
        }
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw ClusterError(message: "no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

package struct ClusterError: Error, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}
