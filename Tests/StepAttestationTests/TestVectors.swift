import Foundation

/// The attestation test vectors, copied verbatim from the project's shared/vectors (see Vectors/index.json
/// for where each came from and its license), so the tests need nothing outside the repository.
enum TestVectors {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Vectors")
}
