'use client';
/**
 * Sign-in: the root tenant's people at /login, a tenant's members at /login?org=<tenant>. A person
 * with a second factor is asked for the code in a second step.
 */
import { useSearchParams } from 'next/navigation';
import { useState, type FormEvent } from 'react';
import { isComputeClientError } from '@better-compute/client';
import { iamCall } from '@/lib/api';
import { ErrorNote } from '@/components/ui';

export function LoginForm() {
  const params = useSearchParams();
  const org = params.get('org')?.trim() || 'root';
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [totp, setTotp] = useState('');
  const [needsCode, setNeedsCode] = useState(false);
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      await iamCall('sessions/signIn', {
        tenantId: org,
        email,
        password,
        ...(needsCode && totp ? { totp: totp.trim() } : {}),
      });
      window.location.assign('/reservations');
    } catch (caught) {
      if (isComputeClientError(caught) && caught.details?.mfaRequired === true && !needsCode) {
        setNeedsCode(true);
      } else setError(caught);
      setPending(false);
    }
  }

  return (
    <form onSubmit={(event) => void submit(event)} aria-describedby="tenant-note">
      <p id="tenant-note" className="note">
        {org === 'root' ? 'Platform administrators and the root tenant.' : `Members of ${org}.`}
      </p>
      <label>
        Email
        <input
          type="email"
          name="email"
          autoComplete="username"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
      </label>
      <label>
        Password
        <input
          type="password"
          name="password"
          autoComplete="current-password"
          required
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
      </label>
      {needsCode ? (
        <label>
          Code from your authenticator (or a recovery code)
          <input
            name="totp"
            autoComplete="one-time-code"
            inputMode="numeric"
            required
            autoFocus
            value={totp}
            onChange={(e) => setTotp(e.target.value)}
          />
        </label>
      ) : null}
      <button type="submit" disabled={pending}>
        {pending ? 'Signing in…' : needsCode ? 'Verify' : 'Sign in'}
      </button>
      <ErrorNote error={error} />
    </form>
  );
}
