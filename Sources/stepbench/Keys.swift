import ArgumentParser
import CryptoExtras
import Foundation

/// `stepbench keys`: a signing key for benchmarks against a production-mode server.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a new RSA signing key (key.pem) and its JWKS (jwks.json) into a folder.",
        discussion: """
            A production-mode server refuses the development key: give it jwks.json as jwt.jwksFile (and as \
            appCheck.jwksFile), and stepbench `--signing-key key.pem --app-check-project <number>`.
            """)

    @Option(help: "The folder to write into (created if missing).")
    var out: String

    func run() async throws {
        let key = try BenchSigningKey(generating: ())
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let pem = (out as NSString).appendingPathComponent("key.pem")
        try key.privateKey.pemRepresentation.write(toFile: pem, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: pem)
        try key.jwks.write(
            toFile: (out as NSString).appendingPathComponent("jwks.json"), atomically: true, encoding: .utf8)
        print("wrote \(pem) and jwks.json (key id \(BenchSigningKey.keyID))")
    }
}
