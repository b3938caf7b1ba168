#if canImport(DeviceCheck) && canImport(CryptoKit) && canImport(Security)
    import CryptoKit
    import DeviceCheck
    import Foundation
    import Security

    /// App Attest on the device: the first submission attests a new Secure Enclave key, every later one asserts
    /// with it. The key id lives in the keychain (this device only, after first unlock), so a backup restored
    /// onto another phone does not carry it; if the server still refuses the key, ``reset()`` drops it and the
    /// next submission attests afresh.
    @available(iOS 15.0, macOS 12.0, *)
    public actor AppAttestAttestor: Attestor {
        public nonisolated let platform = HealthPlatform.ios
        private let service: String
        private let account = "app-attest-key-id"
        /// Tries of one DeviceCheck call while Apple answers `serverUnavailable`, with the same key.
        private let attempts: Int

        /// - Parameter keychainService: the keychain service the key id is stored under. The server keeps keys per
        ///   walker: where several walkers may sign in on one phone, give each its own (`"StepLedgerClient.<walker>"`).
        public init(keychainService: String = "StepLedgerClient", attempts: Int = 3) {
            self.service = keychainService
            self.attempts = max(1, attempts)
        }

        /// Whether this device can use App Attest (not the Simulator, not before iOS 14).
        public nonisolated static var isSupported: Bool { DCAppAttestService.shared.isSupported }

        public func attest(nonce: String) async throws -> DeviceAttestation {
            let clientDataHash = Data(SHA256.hash(data: Data(nonce.utf8)))
            if let keyId = storedKeyId() {
                do {
                    let assertion = try await retrying { service in
                        try await service.generateAssertion(keyId, clientDataHash: clientDataHash)
                    }
                    return DeviceAttestation(token: assertion.base64EncodedString(), keyId: keyId)
                } catch let error as DCError where error.code == .invalidKey {
                    // The key is gone from the Secure Enclave (a restored backup, a reinstall): attest a new one.
                    deleteKeyId()
                }
            }
            let keyId = try await retrying { service in try await service.generateKey() }
            let attestation = try await retrying { service in
                try await service.attestKey(keyId, clientDataHash: clientDataHash)
            }
            storeKeyId(keyId)
            return DeviceAttestation(token: attestation.base64EncodedString())
        }

        public func reset() async {
            deleteKeyId()
        }

        /// Runs `call`, again with the same arguments while Apple's service is unavailable.
        private func retrying<Value: Sendable>(
            _ call: @Sendable (DCAppAttestService) async throws -> Value
        ) async throws -> Value {
            var attempt = 0
            while true {
                attempt += 1
                do {
                    return try await call(DCAppAttestService.shared)
                } catch let error as DCError where error.code == .serverUnavailable && attempt < attempts {
                    try await Task.sleep(nanoseconds: UInt64(attempt) * 1_000_000_000)
                }
            }
        }

        private var query: [String: Any] {
            [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: account,
            ]
        }

        private func storedKeyId() -> String? {
            var search = query
            search[kSecReturnData as String] = true
            search[kSecMatchLimit as String] = kSecMatchLimitOne
            var item: CFTypeRef?
            guard SecItemCopyMatching(search as CFDictionary, &item) == errSecSuccess, let data = item as? Data else {
                return nil
            }
            return String(data: data, encoding: .utf8)
        }

        private func storeKeyId(_ keyId: String) {
            deleteKeyId()
            var item = query
            item[kSecValueData as String] = Data(keyId.utf8)
            item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            SecItemAdd(item as CFDictionary, nil)
        }

        private func deleteKeyId() {
            SecItemDelete(query as CFDictionary)
        }
    }
#endif
