/**
 * The React hooks render during SSR (the same snapshot on the server, no load started there) and
 * follow their stores in a live render.
 */
import { describe, expect, it } from 'vitest';
import { createElement } from 'react';
import { renderToString } from 'react-dom/server';
import { ListStore, ValueStore, createPermissions, describeAction } from '../src/index.js';
import { useList, usePermission, useStore } from '../src/react.js';

describe('React hooks', () => {
  it('render during SSR without loading anything', () => {
    let loads = 0;
    const store = new ListStore<{ id: string }>({
      load: async () => {
        loads++;
        return { items: [{ id: 'a' }], nextCursor: null };
      },
    });
    const permissions = createPermissions({ authorize: async (checks) => checks.map(() => true) });
    function View() {
      const list = useList(store);
      const allowed = usePermission(permissions, describeAction('reservations', 'release', 'rsv_1'));
      return createElement('p', null, `${list.status}:${list.items.length}:${String(allowed)}`);
    }
    expect(renderToString(createElement(View))).toBe('<p>idle:0:undefined</p>');
    expect(loads).toBe(0);
  });

  it('show a store’s current value on the server', () => {
    const connection = new ValueStore({ status: 'open' });
    function Badge() {
      return createElement('span', null, useStore(connection).status);
    }
    expect(renderToString(createElement(Badge))).toBe('<span>open</span>');
    connection.set({ status: 'retrying' });
    expect(renderToString(createElement(Badge))).toBe('<span>retrying</span>');
  });
});
