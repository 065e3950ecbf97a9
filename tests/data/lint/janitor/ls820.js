/* purpose-built book for lorescan lint: ls820 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['tide'], priority: 2.5, scenario: 'The tide.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
