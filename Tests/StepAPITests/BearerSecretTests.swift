import StepAPI
import StepAttestation
import Synchronization
import Testing

/// A bearer secret (the admin token, the metrics token) cannot be timed: it is compared as a digest, in constant time.
@Suite("Bearer secrets: the comparison")
struct BearerSecretTests {
    @Test("the admin secret matches only itself")
    func credentialMatches() {
        let credential = BearerSecret(token: AdminTests.adminToken)
        #expect(credential.matches(AdminTests.adminToken))
        for other in [
            "", AdminTests.adminToken + "x", String(AdminTests.adminToken.dropLast()),
            AdminTests.adminToken.uppercased(),
            " " + AdminTests.adminToken,
        ] {
            #expect(!credential.matches(other), "\(other)")
        }
    }

    /// Bytes that count how many of them were read.
    struct CountingBytes: Sequence {
        let bytes: [UInt8]
        let reads: Counter

        final class Counter: Sendable {
            let value = Mutex(0)
        }

        func makeIterator() -> AnyIterator<UInt8> {
            var iterator = bytes.makeIterator()
            let reads = reads
            return AnyIterator {
                guard let byte = iterator.next() else { return nil }
                reads.value.withLock { $0 += 1 }
                return byte
            }
        }
    }

    @Test("the comparison reads every byte of both sides whichever byte differs first")
    func constantTime() {
        let secret = [UInt8](repeating: 0xA5, count: 32)
        for position in [0, 1, 16, 31] {
            var guess = secret
            guess[position] ^= 0xFF
            let left = CountingBytes(bytes: secret, reads: .init())
            let right = CountingBytes(bytes: guess, reads: .init())
            #expect(!ConstantTime.equals(left, right))
            #expect(left.reads.value.withLock { $0 } == 32, "difference at \(position)")
            #expect(right.reads.value.withLock { $0 } == 32, "difference at \(position)")
        }
        #expect(ConstantTime.equals(secret, secret))
        #expect(!ConstantTime.equals(secret, secret.dropLast()))
        #expect(!ConstantTime.equals(secret, secret + [0]))
    }
}
