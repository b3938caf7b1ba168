/// Why `stepd device` could not attest or assert; the description is what the person at the terminal reads.
package struct DevelopmentDeviceError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case noApp
        case fileMissing
        case unreadable
        case unwritable
        case otherWalker
        case counterExhausted
    }

    private let code: Code
    package let description: String

    private init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    package static let noApp = Self(
        .noApp, "no App Attest app is configured: set appAttest.teamId and appAttest.bundleIds, or neither")
    package static func fileMissing(path: String) -> Self {
        Self(.fileMissing, "no device file at \(path): run `stepd device attest` for this walker first")
    }
    package static func unreadable(path: String, detail: String) -> Self {
        Self(.unreadable, "the device file \(path) cannot be read: \(detail)")
    }
    package static func unwritable(path: String, detail: String) -> Self {
        Self(.unwritable, "the device file \(path) cannot be written: \(detail)")
    }
    package static func otherWalker(path: String, walkerId: String) -> Self {
        Self(.otherWalker, "the device file \(path) belongs to walker \(walkerId); pass --device-file for this walker")
    }
    package static let counterExhausted = Self(
        .counterExhausted, "the device's assertion counter is exhausted: run `stepd device attest` for a new key")

    /// Same kind of failure, whatever the path or detail.
    package func hasSameKind(as other: Self) -> Bool {
        code == other.code
    }
}
