import { Suspense } from 'react';
import { LoginForm } from './login-form';

export const dynamic = 'force-dynamic';

export default function LoginPage() {
  return (
    <main className="login" id="main">
      <h1>Sign in</h1>
      <Suspense fallback={<p>Loading</p>}>
        <LoginForm />
      </Suspense>
    </main>
  );
}
