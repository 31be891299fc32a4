/**
 * A React hook re-rendering a component whenever the chat controller, its chat
 * model or its served models change (the panel's header and the status bar item).
 */

import * as React from 'react';

import type { ChatController } from './controller';

export function useControllerSignals(controller: ChatController): void {
  const [, setTick] = React.useState(0);
  React.useEffect(() => {
    const bump = () => setTick(t => t + 1);
    controller.changed.connect(bump);
    controller.model.stateChanged.connect(bump);
    controller.models.changed.connect(bump);
    return () => {
      controller.changed.disconnect(bump);
      controller.model.stateChanged.disconnect(bump);
      controller.models.changed.disconnect(bump);
    };
  }, [controller]);
}
